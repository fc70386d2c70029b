"""The rigs of the channel conformance suite, registered in :data:`support.channel_rig.RIGS` (one line per
channel kind; each factory gets the test's fresh home and the pytest request, for session fixtures)."""

from __future__ import annotations

from support.channel_rig import RIGS
from support.discord_rig import DiscordConformanceRig
from support.matrix_rig import MatrixConformanceRig
from support.slack_rig import SlackConformanceRig
from support.telegram_rig import TelegramConformanceRig

RIGS["telegram"] = TelegramConformanceRig
RIGS["matrix"] = MatrixConformanceRig
RIGS["slack"] = SlackConformanceRig
RIGS["discord"] = DiscordConformanceRig
