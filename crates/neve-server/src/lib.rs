//! neve serve
