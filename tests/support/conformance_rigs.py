"""The rigs of the channel conformance suite, registered in :data:`support.channel_rig.RIGS` (one line per
channel kind; each factory gets the test's fresh home and the pytest request, for session fixtures).

A rig that needs a session fixture (one homeserver, one mail server per run) asks for it with
``request.getfixturevalue``; the fixture is imported in tests/conftest.py, once: a fixture imported into a test
module as well would be a second definition there, a second homeserver for the run."""

from __future__ import annotations

from support.channel_rig import RIGS
from support.discord_rig import DiscordConformanceRig
from support.mail_conformance import EmailConformanceRig
from support.matrix_rig import MatrixConformanceRig
from support.slack_rig import SlackConformanceRig
from support.telegram_rig import TelegramConformanceRig

RIGS["telegram"] = TelegramConformanceRig
RIGS["matrix"] = MatrixConformanceRig
RIGS["slack"] = SlackConformanceRig
RIGS["discord"] = DiscordConformanceRig
RIGS["email"] = EmailConformanceRig

__all__: list[str] = []  # session fixtures live in tests/conftest.py: one per run, never one per module
