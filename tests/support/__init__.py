"""Helpers shared by tests of several areas: servers, readiness, facilities, databases."""
