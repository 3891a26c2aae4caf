"""Scripts the core ships to nodes: self-contained files, sent as the stdin of the node's Python."""
