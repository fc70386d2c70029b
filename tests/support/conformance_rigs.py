"""The rigs of the channel conformance suite, registered in :data:`support.channel_rig.RIGS` (one line per
channel kind; each factory gets the test's fresh home and the pytest request, for session fixtures).

A rig that needs a session fixture (one homeserver, one mail server per run) names it in ``__all__``:
the suite's module star-imports this one, so the fixture is visible to ``request.getfixturevalue`` there
and the suite itself stays unchanged when a channel is added."""

from __future__ import annotations

from support.channel_rig import RIGS
from support.discord_rig import DiscordConformanceRig
from support.mail_conformance import EmailConformanceRig
from support.mail_rig import dovecot
from support.matrix_rig import MatrixConformanceRig, synapse
from support.slack_rig import SlackConformanceRig
from support.telegram_rig import TelegramConformanceRig

RIGS["telegram"] = TelegramConformanceRig
RIGS["matrix"] = MatrixConformanceRig
RIGS["slack"] = SlackConformanceRig
RIGS["discord"] = DiscordConformanceRig
RIGS["email"] = EmailConformanceRig

__all__ = ["dovecot", "synapse"]  # the session fixtures the rigs ask for
