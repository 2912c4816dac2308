"""The customer as a service: its records, its upstream clients, its enrolment."""
