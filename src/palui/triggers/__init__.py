"""What starts turns when nobody is typing (spec §8): scheduled jobs and inbound webhooks.

- :mod:`palui.triggers.clock` — the scheduler's clock (real, or the test clock ``PALUI_TEST_CLOCK``).
- :mod:`palui.triggers.jobs` — cron expressions, next runs, the ``jobs`` table.
- :mod:`palui.triggers.webhooks` — webhook secrets, signature checks, replay store, rate limit.

The scheduler that starts due jobs is part of the service: :mod:`palui.service.scheduler`.
"""
