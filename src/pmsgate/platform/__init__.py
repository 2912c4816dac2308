"""Clients of the assistant platform (``assistant``: its ``/v1`` API) and the notes workspace."""
