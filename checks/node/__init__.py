"""Node-side probes: self-contained scripts shipped to each node and run with its own Python."""
