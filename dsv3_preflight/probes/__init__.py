"""Built-in probes: the only code that touches the system. Each returns plain JSON data."""
