"""Versioned data every customer is provisioned from: tools, skills, guardrails, templates."""
