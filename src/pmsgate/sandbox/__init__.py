"""Stateful emulators of the upstream systems, for tests, demos and load runs."""
