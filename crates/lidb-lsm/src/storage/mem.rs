//! PLACEHOLDER: in-memory storage with crash simulation and fault injection (being written).
