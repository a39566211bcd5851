"""Library helpers shared by training, conversion and the apps (not Hub-bound): typed errors, optional extras,
scoped logging, running code without the package, and the rules for output directories."""
