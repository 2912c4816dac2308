"""Onboarding as a program: the 17 steps (docs/requirements.md R21), runner, checklist and CLI.

- :mod:`.steps` — what a step is (:class:`~.steps.Step`, :class:`~.steps.StepResult`,
  :class:`~.steps.OnboardingContext` and its typed :class:`~.steps.RunState`);
- :mod:`.registry` — the runbook: the explicit tuple :data:`~.registry.STEPS`;
- :mod:`.steps_setup` (1-5, 8), :mod:`.steps_provisioning` (6, 7),
  :mod:`.steps_knowledge` (9-14), :mod:`.steps_channels` (15, 16),
  :mod:`.steps_route_b` (17) — the steps themselves;
- :mod:`.runner` — check → apply → check, persisted results, resume, dry run, confirm;
- :mod:`.customer_file` — the YAML customer file; :mod:`.context` — the services;
- :mod:`.report` — run reports and checklists; ``pmsgate onboard`` is :mod:`pmsgate.cli.onboard`.

See ``docs/onboarding.md``.
"""
