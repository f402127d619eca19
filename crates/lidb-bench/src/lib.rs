//! lidb-bench: experiments as commands.
