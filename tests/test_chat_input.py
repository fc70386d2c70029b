"""Input that never breaks the terminal chat (spec §8.2), in a real terminal driven by tmux:

- escape sequences typed without bracketed paste (``ESC [ 31 m``, which prompt_toolkit's parser reads as a
  mouse report) never lose the rest of the line: the message is stored as typed;
- ``/quit`` typed while a turn runs leaves the turn's answer on the screen, also a fast one from the service;
- one screen shows a hidden character in one escape form (a call line and the approval prompt agree).
"""

from __future__ import annotations

import sqlite3

import pytest

from support.chatdrive import TmuxChat
from support.live_service import wait_for
from support.scripts import call, calls, write_script

pytestmark = pytest.mark.slow
BANNER = "/help for commands."
ESC = "\x1b"


def turn_inputs(home) -> list[str]:
    con = sqlite3.connect(home / "palui.db", timeout=30)
    try:
        return [r[0] for r in con.execute("SELECT input FROM turns ORDER BY created_at")]
    finally:
        con.close()


def test_escape_sequences_typed_without_bracketed_paste_keep_the_whole_line(home, tmp_path):
    typed = f"pay {ESC}[31mred{ESC}[0m and \u202eevil\u202c now"
    model = write_script(tmp_path / "s.json", {"text": "Noted."})
    with TmuxChat(home, "--model", model) as chat:
        chat.wait_for(BANNER, 60)
        chat.send(typed)  # send-keys -l: the bytes arrive as keystrokes, not as a bracketed paste
        chat.wait_for("Noted.", 60)
        mark = chat.mark()
        chat.send(f"and {ESC}[99~ after")  # a sequence no key has: its ESC is dropped, the rest kept
        chat.wait_for("Noted.", 60, after=mark)
        shown = chat.output()
        assert "Traceback" not in shown and "unpack" not in shown
        # The line typed is shown again escaped, one form per character (spec §4.7), never raw.
        assert "you> pay \\u001b[31mred\\u001b[0m and \\u202eevil\\u202c now (contains hidden characters)" in shown
        assert "\u202e" not in shown
    assert turn_inputs(home) == [typed, "and [99~ after"]


def test_quit_while_a_turn_runs_leaves_the_answer_on_the_screen(home, tmp_path):
    answer = "The final answer, streamed word by word and kept on the screen."
    model = write_script(tmp_path / "s.json", {"text": answer, "stream_delay_seconds": 0.3})
    with TmuxChat(home, "--model", model) as chat:
        chat.wait_for(BANNER, 60)
        chat.send("think a little")
        chat.wait_for("The final", 30)  # /quit while the answer streams
        chat.send("/quit")
        chat.wait_for("leaving when the running turn ends", 10)
        wait_for(lambda: chat.exit_code() is not None, 60, what="the chat to leave")
        assert chat.exit_code() == 0
        assert answer in chat.output(), chat.output()


def test_quit_while_a_fast_answer_streams_from_the_service_leaves_it_on_the_screen(home, tmp_path):
    # The chat used to cancel its prompt at the end; prompt_toolkit then dropped a write still in flight (the
    # answer's line, printed above the prompt) and erased its area over one just made: about one chat in two
    # lost the answer. Four chats in a row, each leaving as soon as the answer starts.
    from support.live_service import LiveService

    answer = "A quick answer, every word of it kept on the screen after /quit."
    model = write_script(tmp_path / "s.json", *({"text": answer, "stream_delay_seconds": 0.02} for _ in range(4)))
    (home / "palui.toml").write_text(f'model = "{model}"\n', encoding="utf-8")
    with LiveService(home):
        for i in range(4):
            (home / "chat-exit.txt").unlink(missing_ok=True)  # where TmuxChat writes the exit code
            with TmuxChat(home) as chat:
                chat.wait_for(BANNER, 60)
                chat.send(f"answer quickly {i}")
                chat.wait_for("A quick", 30)
                chat.send("/quit")
                wait_for(lambda: chat.exit_code() is not None, 60, what="the chat to leave")
                assert answer in chat.output(), (i, chat.output())


def test_one_screen_shows_a_hidden_character_in_one_escape_form(home, tmp_path, cli):
    """An argument with ESC and a backslash: the approval prompt and the call line show the same escapes. (A
    text argument of a tool the person made destructive, so that it is asked: the argument must fit the tool's
    input schema, spec §3.3, and the destructive built-ins take whole-number ids.)"""
    assert cli("tools", "set-class", "recall__add_memory", "destructive").returncode == 0
    model = write_script(tmp_path / "s.json", calls(call("recall__add_memory", text=f"x{ESC}y\\z")),
                         {"text": "Done asking."})
    with TmuxChat(home, "--model", model) as chat:
        chat.wait_for(BANNER, 60)
        chat.send("forget it")
        chat.wait_for("[y/n]", 60)
        chat.send("y")
        chat.wait_for("Done asking.", 60)
        shown = chat.output()
    form = '"x\\u001by\\\\z"'  # spec §4.7: \u001b for ESC, a literal backslash doubled
    call_lines = [ln for ln in shown.splitlines() if "recall__add_memory" in ln and "→" in ln]
    assert call_lines and all(form in ln for ln in call_lines), shown
    assert shown.count(form) >= 2, shown  # the approval prompt and the call line
    assert '\\\\u001b' not in shown, shown
