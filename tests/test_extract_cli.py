"""corral.extract and the ``corral extract`` command: order, per-record errors, malformed
lines, progress output, resume after an interruption."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import jsonschema
import pytest
from support.tiny_models import tiny_llama
from support.tokenizers import load_tokenizer

import corral
from corral.integrations import cli
from corral.integrations.extract import extract_iter

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 8},
        "ok": {"type": "boolean"},
    },
    "required": ["name", "ok"],
    "additionalProperties": False,
}
DOCS = ["Ann is fine.", "Bob is not.", "Cy, 3 years, is well.", "Di left.", "Ed stayed home."]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):  # type: ignore[no-untyped-def]
    tok = load_tokenizer("gpt2")
    model = tiny_llama(tok)
    path = tmp_path_factory.mktemp("tiny-model")
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def test_extract_api_one_valid_record_per_document(model_dir) -> None:  # type: ignore[no-untyped-def]
    records = corral.extract(str(model_dir), DOCS, SCHEMA, batch_size=2, max_new_tokens=60)
    assert len(records) == len(DOCS)
    for r in records:
        jsonschema.validate(r, SCHEMA)
    # batching does not change the (greedy) result of any document
    single = corral.extract(str(model_dir), DOCS[:2], SCHEMA, batch_size=1, max_new_tokens=60)
    assert single == records[:2]
    with pytest.raises(corral.IncompleteGenerationError):
        corral.extract(str(model_dir), DOCS[:1], SCHEMA, max_new_tokens=3)
    assert corral.extract(str(model_dir), DOCS[:1], SCHEMA, max_new_tokens=3, errors="none") == [
        None
    ]
    with pytest.raises(ValueError, match="document"):
        corral.extract(str(model_dir), DOCS, SCHEMA, prompt="no placeholder")


def _write_inputs(path: Path) -> None:
    lines = [
        json.dumps({"id": "a", "text": DOCS[0]}),
        json.dumps(DOCS[1]),
        "{not json",
        "",
        json.dumps({"id": "d", "body": "wrong field"}),
        json.dumps({"id": "e", "text": DOCS[4]}),
        json.dumps(DOCS[2]),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _args(model_dir: Path, tmp: Path, **over) -> argparse.Namespace:  # type: ignore[no-untyped-def]
    schema = tmp / "schema.json"
    schema.write_text(json.dumps(SCHEMA), encoding="utf-8")
    ns = dict(
        model=str(model_dir), schema=str(schema), input=str(tmp / "in.jsonl"),
        output=str(tmp / "out.jsonl"), field="text", prompt=None, batch_size=2,
        max_new_tokens=60, no_progress=False,
    )  # fmt: skip
    ns.update(over)
    return argparse.Namespace(**ns)


def _rows(path: Path) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def test_cli_rows_errors_progress_and_resume(model_dir, tmp_path) -> None:  # type: ignore[no-untyped-def]
    _write_inputs(tmp_path / "in.jsonl")
    err = io.StringIO()
    status = cli.run_extract(_args(model_dir, tmp_path), stderr=err)
    rows = _rows(tmp_path / "out.jsonl")
    assert [r["line"] for r in rows] == [1, 2, 3, 5, 6, 7]  # blank line 4 skipped, order kept
    assert status == 1  # two malformed lines
    assert "input line 3: not JSON" in rows[2]["error"]
    assert "input line 5" in rows[3]["error"] and rows[3]["id"] == "d"
    good = [r for r in rows if "record" in r]
    assert len(good) == 4 and rows[0]["id"] == "a" and rows[4]["id"] == "e"
    for r in good:
        jsonschema.validate(r["record"], SCHEMA)
    assert "6/6" in err.getvalue()  # the progress bar reached the end

    # an interrupted run: keep two complete lines and half of the third
    full = (tmp_path / "out.jsonl").read_bytes()
    lines = full.splitlines(keepends=True)
    (tmp_path / "out.jsonl").write_bytes(b"".join(lines[:2]) + lines[2][:7])
    err = io.StringIO()
    cli.run_extract(_args(model_dir, tmp_path), stderr=err)
    assert (tmp_path / "out.jsonl").read_bytes() == full  # nothing lost, nothing twice
    assert "2/6" in err.getvalue()  # resumed after the two complete lines
    # a finished output: rerunning adds nothing
    cli.run_extract(_args(model_dir, tmp_path, no_progress=True))
    assert (tmp_path / "out.jsonl").read_bytes() == full


def test_cli_records_failed_documents_and_reports_bad_input(model_dir, tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "in.jsonl").write_text(json.dumps(DOCS[0]) + "\n", encoding="utf-8")
    status = cli.run_extract(_args(model_dir, tmp_path, max_new_tokens=3, no_progress=True))
    (row,) = _rows(tmp_path / "out.jsonl")
    assert status == 1 and row["error"].startswith("IncompleteGenerationError")
    assert row["partial"].startswith('{"')

    # bad invocations: clear message, exit status 2, output untouched
    def run(model: object, schema: str, output: str) -> int:
        argv = ["extract", "--model", str(model), "--schema", str(tmp_path / schema)]
        return cli.main([*argv, "--input", str(tmp_path / "in.jsonl"), "--output",
                         str(tmp_path / output)])  # fmt: skip

    assert run(tmp_path / "nope", "schema.json", "o2.jsonl") == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text('{"type": "object",', encoding="utf-8")
    assert run(model_dir, "bad.json", "o3.jsonl") == 2
    msg = capsys.readouterr().err
    assert "line 1" in msg and not (tmp_path / "o3.jsonl").exists()
    (tmp_path / "foreign.jsonl").write_text("hello\n", encoding="utf-8")
    assert run(model_dir, "schema.json", "foreign.jsonl") == 2
    assert "did not write" in capsys.readouterr().err


def test_a_document_longer_than_the_context_is_its_own_error(model_dir) -> None:  # type: ignore[no-untyped-def]
    """The tiny model takes 2,048 positions: a longer prompt is refused for its document
    alone (before any forward pass), and generate refuses it outright."""
    long_doc = "word " * 3000
    items = list(
        extract_iter(str(model_dir), [DOCS[0], long_doc, DOCS[1]], SCHEMA,
                            batch_size=3, max_new_tokens=60)
    )  # fmt: skip
    assert [x.index for x in items] == [0, 1, 2]
    assert isinstance(items[1].error, corral.PromptTooLongError)
    assert "2048" in str(items[1].error) and "document 1" in str(items[1].error)
    assert items[0].ok and items[2].ok
    alone = corral.extract(str(model_dir), DOCS[:2], SCHEMA, batch_size=2, max_new_tokens=60)
    assert [items[0].value, items[2].value] == alone  # the others are as without it
    with pytest.raises(corral.PromptTooLongError, match="2048"):
        corral.generate(str(model_dir), long_doc, schema=SCHEMA, max_new_tokens=4)


def test_an_error_keeps_no_extractor_alive(model_dir) -> None:  # type: ignore[no-untyped-def]
    """An error kept in an Extraction carries no traceback: its frames would hold the
    extractor (with its model, or its vLLM engine, whose processes the interpreter then
    waits on at exit) in a reference cycle until a garbage collection, if one comes."""
    import gc
    import weakref

    from corral.integrations.extract import make_extractor

    gc.collect()
    gc.disable()
    try:
        ex = make_extractor(str(model_dir), SCHEMA, max_new_tokens=8)
        alive = weakref.ref(ex)
        items = list(ex.run([(0, "word " * 3000), (1, DOCS[0])]))
        assert isinstance(items[0].error, corral.PromptTooLongError)
        assert items[0].error.__traceback__ is None
        assert all(x.error is None or x.error.__traceback__ is None for x in items)
        del ex
        assert alive() is None  # freed when its last reference went, with no collection
    finally:
        gc.enable()


FOREIGN = [
    b"important notes",  # no newline: not a cut row of corral's
    b"first\nsecond",
    b'{"line": 3, "text": "someone else\'s row"}\n',
    b'{"line": 1, "record": {}, "error": "both"}\n',
    b'{"line": 2, "record": {}}\n{"line": 1, "record": {}}\n',  # not in input order
    b'{"line":1,"record":{}}\n',  # not as corral spells its rows
    b'{"line": 1, "record": {}}\n{"id": 5, "rec',
    b'{"line": true, "record": {}}\n',
    b'{"line": 1, "record": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n",  # too deep to read
]


@pytest.mark.parametrize("content", FOREIGN)
def test_an_output_file_corral_did_not_write_is_refused_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes
) -> None:
    out = tmp_path / "out.jsonl"
    out.write_bytes(content)
    with pytest.raises(corral.CorralError, match="did not write"):
        cli.resume_point(out)
    (tmp_path / "in.jsonl").write_text(json.dumps("a doc") + "\n", encoding="utf-8")
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA), encoding="utf-8")
    argv = ["extract", "--model", str(tmp_path / "no-model"), "--schema",
            str(tmp_path / "schema.json"), "--input", str(tmp_path / "in.jsonl"),
            "--output", str(out)]  # fmt: skip
    assert cli.main(argv) == 2
    assert "did not write" in capsys.readouterr().err
    assert out.read_bytes() == content


def test_resume_point_reads_corral_rows_and_changes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    rows = b'{"line": 1, "id": "a", "record": {"x": 1}}\n{"line": 3, "error": "e", "partial": ""}\n'
    for cut in [b"", b"{", b'{"line": ', b'{"line": 4, "reco']:
        out.write_bytes(rows + cut)
        assert cli.resume_point(out) == (3, len(rows) if cut else None)
        assert out.read_bytes() == rows + cut
    out.write_bytes(b"")
    assert cli.resume_point(out) == (0, None)
    assert cli.resume_point(tmp_path / "new.jsonl") == (0, None)


@pytest.mark.parametrize("flag", ["--batch-size", "--max-new-tokens"])
@pytest.mark.parametrize("value", ["0", "-1", "x"])
def test_sizes_below_one_are_refused_by_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str
) -> None:
    argv = ["extract", "--model", "m", "--schema", "s", "--input", "i", "--output",
            str(tmp_path / "o.jsonl"), flag, value]  # fmt: skip
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == 2 and flag in capsys.readouterr().err
    assert not (tmp_path / "o.jsonl").exists()


def test_an_input_line_nested_too_deeply_is_that_line_s_error(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text("[" * 100_000 + "]" * 100_000 + "\n" + json.dumps("ok") + "\n", "utf-8")
    rows = list(cli.read_inputs(path, "text"))
    assert rows[0][0] == 1 and "nested too deeply" in str(rows[0][3])
    assert rows[1] == (2, None, "ok", None)
