//! lidb-data: datasets, key mapping, synthetic distributions and workloads.
