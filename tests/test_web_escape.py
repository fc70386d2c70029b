"""The web page's script escapes hidden characters exactly as the server does (spec §4.7).

``static/hidden.js`` is generated from the same Unicode table (``scripts/gen_hidden_js.py``); the
same inputs give the same segments in Node as in :func:`palui.text.escape.segments`, and the HTML
rendering uses styled spans that plain text cannot imitate.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from palui.text.escape import segments
from palui.web.shown import finalize, json_html, shown_html

ROOT = Path(__file__).resolve().parents[1]
JS = ROOT / "src" / "palui" / "web" / "static" / "hidden.js"

CASES = ["plain", "a\u202eb\u202c", "x\U000e0041\U000e0042y", "C:\\path\\u202e", "tab\there\nnew line",
         "eight        spaces", "seven       spaces", "\ufeffBOM", "\u00adsoft", "e\u0301", "emoji \u2764\ufe0f",
         "lone \ud800 surrogate", "priv \ue000", "unassigned \U000e0fff", "\x1b[2J\x00\x7f", "line\u2028sep",
         "\u3000" * 9 + "ideographic", ""]


def test_the_generated_script_is_current():
    sys.path.insert(0, str(ROOT / "scripts"))
    import gen_hidden_js

    assert JS.read_text(encoding="utf-8") == gen_hidden_js.render(), "run scripts/gen_hidden_js.py"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
@pytest.mark.parametrize("one_line", [False, True])
def test_the_script_renders_like_the_server(one_line):
    probe = (f"global.window = {{}}; require({json.dumps(str(JS))});"
             f"const cases = {json.dumps(CASES)};"
             f"console.log(JSON.stringify(cases.map((c) => window.PaluiText.segments(c, {json.dumps(one_line)}))));"
             f"console.log(JSON.stringify(cases.map((c) => window.PaluiText.hasHidden(c))));")
    out = subprocess.run(["node", "-e", probe], capture_output=True, text=True, check=True,
                         encoding="utf-8", errors="surrogatepass").stdout.splitlines()
    js_segments, js_hidden = json.loads(out[0]), json.loads(out[1])
    for case, got in zip(CASES, js_segments, strict=True):
        assert [tuple(s) for s in got] == segments(case, one_line=one_line), case
    from palui.text.escape import has_hidden

    assert js_hidden == [has_hidden(c) for c in CASES]


def test_html_escapes_are_spans_plain_text_cannot_imitate():
    real = str(shown_html("pay \u202e0001 RUE"))
    typed = str(shown_html("pay \\u202e0001 RUE"))
    assert real == ('pay <span class="hidden-char" title="hidden characters">\\u202e</span>0001 RUE'
                    ' <span class="hidden-note">contains hidden characters</span>')
    assert typed == 'pay <span class="backslash">\\\\</span>u202e0001 RUE'  # typed text: a doubled backslash
    assert "<b>" not in str(shown_html("<b>x</b>\u200b"))
    assert str(shown_html("a\nb", one_line=True)).count("hidden-char") == 1
    assert 'class="space-run"' in str(shown_html("a" + " " * 8 + "b"))
    assert "contains hidden characters" in str(json_html({"k": ["v\U000e0020"]}))
    # the template backstop: a plain string with a hidden character becomes escape text (safe in attributes)
    assert finalize("x\u202ey") == "x\\u202ey" and finalize(shown_html("x")) == "x" and finalize(3) == 3
