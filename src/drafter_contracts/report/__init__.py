"""Reports read results; they never recompute anything from the data."""
