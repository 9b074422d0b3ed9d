"""`trellis run` and `trellis chat` on the tiny model."""

import io
import json
import re

from trellis.cli import main


def test_run_with_a_regex_prints_a_match_and_stats(tiny_model, capsys):
    args = ["run", "--model", str(tiny_model[1]), "--prompt", "hi", "--regex", r"[a-z]{3}-\d{2}",
            "--max-tokens", "12", "--complete-on-length", "--temperature", "1", "--seed", "3"]
    assert main(args) == 0
    out, err = capsys.readouterr()
    assert re.fullmatch(r"[a-z]{3}-\d{2}", out.splitlines()[0]), out
    assert "prefill" in err and "grammar init" in err


def test_run_with_a_json_schema_file(tiny_model, tmp_path, capsys):
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
              "additionalProperties": False}
    (tmp_path / "schema.json").write_text(json.dumps(schema))
    assert main(["run", "--model", str(tiny_model[1]), "--prompt", "hi", "--json-schema", str(tmp_path / "schema.json"),
                 "--max-tokens", "24", "--complete-on-length", "--seed", "1", "--temperature", "1"]) == 0
    value = json.loads(capsys.readouterr().out.split("\n[finish_reason")[0])
    assert set(value) == {"ok"} and isinstance(value["ok"], bool)


def test_run_reports_a_bad_request_as_a_typed_error(tiny_model, capsys):
    assert main(["run", "--model", str(tiny_model[1]), "--prompt", "hi", "--regex", "a(b"]) == 1
    assert "InvalidRequestError: response_format.regex: invalid regular expression" in capsys.readouterr().err


def test_chat_keeps_the_conversation_until_reset(tiny_model, monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO("hello\nand then?\n/reset\nhi\n\n"))
    assert main(["chat", "--model", str(tiny_model[1]), "--max-tokens", "3", "--stats"]) == 0
    out = capsys.readouterr().out
    assert out.count("prefill") == 3  # three answers, each with its stats line
