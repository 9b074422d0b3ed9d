"""The SentencePiece-style tokenizer on Gemma 3's real 262,144-token vocabulary, against Hugging Face
`tokenizers` built from the same GGUF fields (tests/model/hf_reference.py)."""

import random

import pytest

from tests.model.corpus import TEXTS
from tests.model.hf_reference import sentencepiece_reference
from trellis.errors import ModelError
from trellis.model.tokenizer import Tokenizer

pytestmark = pytest.mark.slow

CORPUS = [*TEXTS,  # and this vocabulary's own special tokens among text
    "<start_of_turn>user\nWhat is the capital of France?<end_of_turn>\n<start_of_turn>model\n",
    "<bos><eos> <table><tr><td>cell</td></tr></table> [multimodal] <unused3>",
]


@pytest.fixture(scope="module")
def data():
    from tests.model.gemma3 import gemma3_tokenizer_data

    return gemma3_tokenizer_data()


@pytest.fixture(scope="module")
def ours(data):
    return Tokenizer(data)


@pytest.fixture(scope="module")
def reference(data):
    return sentencepiece_reference(data)


def test_gemma3_fields(ours, data):
    assert (ours.model, ours.vocab_size, ours.bos_token_id, ours.eos_token_id) == ("llama", 262144, 2, 1)
    assert ours.add_bos and not ours.add_eos and not ours.add_space_prefix  # as the GGUF says
    assert len(data["scores"]) == 262144


@pytest.mark.parametrize("text", CORPUS)
def test_encode_matches_hf(ours, reference, text):
    assert ours.encode(text) == reference.encode(text).ids


def test_generated_corpus_matches_hf(ours, reference):
    rng = random.Random(5)
    alphabet = "ab Zé1 2\n\t'sœ😀,.-_()  7x\u00a0日本<>/\u2581\r\u0d9e"
    words = ["the", " the", "<table>", "<start_of_turn>", "ing", "\n\n", "   ", "tion", "語"]
    texts = ["".join(rng.choice(alphabet) if rng.random() < 0.8 else rng.choice(words)
                     for _ in range(rng.randint(1, 40))) for _ in range(300)]
    assert [ours.encode(t) for t in texts] == [e.ids for e in reference.encode_batch(texts)]


def test_space_prefix_matches_hf_prepend(data):
    """Llama 2 / Mistral style (add_space_prefix): every text fragment gets a leading U+2581."""
    ours = Tokenizer({**data, "add_space_prefix": True})
    reference = sentencepiece_reference(data, add_space_prefix=True)
    for text in CORPUS[1:]:
        assert ours.encode(text) == reference.encode(text).ids, text
    assert ours.decode(ours.encode("Hi there")) == " Hi there"
    assert ours.encode_bytes(b"Hi") == Tokenizer(data).encode("Hi")  # no prefix inside an output


@pytest.mark.parametrize("text", CORPUS)
def test_decode_round_trips(ours, reference, text):
    ids = ours.encode(text)
    assert ours.decode(ids) == text == reference.decode(ids, skip_special_tokens=False)


def test_token_bytes(ours):
    assert ours.token_bytes(ours.token_to_id("\u2581the")) == b" the"
    assert ours.token_bytes(ours.token_to_id("<0x0A>")) == b"\n"
    assert ours.token_bytes(ours.token_to_id("<0xE6>")) == b"\xe6"
    assert ours.token_bytes(ours.token_to_id("\n\n")) == b"\n\n"  # user-defined: literal text
    assert ours.token_bytes(2) == b"<bos>"
    assert 2 in ours.special_ids and ours.token_to_id("\n") not in ours.special_ids


def test_byte_fallback_and_stream_decoding(ours):
    text = "\u0132\u013f\u01a5"  # characters with no piece of their own in Gemma 3 (2 bytes each)
    ids = ours.encode(text)
    assert all(238 <= i <= 493 for i in ids) and len(ids) == len(text.encode())
    stream = ours.stream_decoder()
    pieces = [stream.push(i) for i in ids] + [stream.flush()]
    assert pieces[:2] == ["", "\u0132"] and "".join(pieces) == text


def test_special_tokens_and_bos(ours):
    ids = ours.encode("<start_of_turn>user\nHi<end_of_turn>")
    assert ids[0] == 105 and ids[-1] == 106 and ours.token_to_id("\n") in ids
    assert ours.decode(ids, skip_special=True) == "user\nHi"
    # special=False: control tokens are plain text; user-defined tokens still match (llama.cpp's rule).
    plain = ours.encode("<start_of_turn>\n", special=False)
    assert 105 not in plain and plain[-1] == ours.token_to_id("\n")
    assert ours.decode(plain) == "<start_of_turn>\n"
    assert ours.encode("Hi", add_special=True) == [2] + ours.encode("Hi")
    assert ours.encode("<bos>Hi", add_special=True) == [2] + ours.encode("Hi")  # never doubled


def test_encode_bytes_splits_partial_characters(ours):
    data = "日本".encode()[:-1]
    ids = ours.encode_bytes(data)
    assert b"".join(ours.token_bytes(i) for i in ids) == data


def test_unsupported_model_is_named(data):
    with pytest.raises(ModelError, match="tokenizer.ggml.model 'bert'"):
        Tokenizer({**data, "model": "bert"})
    without_scores = {k: v for k, v in data.items() if k != "scores"}
    with pytest.raises(ModelError, match="scores"):
        Tokenizer(without_scores)


_PYODIDE_JS = r"""
const path = require("path"), fs = require("fs");
const [pyodideDir, packageDir, dataPath, sidePath] = process.argv.slice(2);
const { loadPyodide } = require(pyodideDir + "/pyodide.js");
(async () => {
  const py = await loadPyodide({ indexURL: pyodideDir + "/" });
  function copy(dir, dest) {
    py.FS.mkdirTree(dest);
    for (const f of fs.readdirSync(dir)) {
      const p = path.join(dir, f);
      if (fs.statSync(p).isDirectory()) { if (f !== "__pycache__") copy(p, dest + "/" + f); }
      else if (f.endsWith(".py")) py.FS.writeFile(dest + "/" + f, fs.readFileSync(p));
    }
  }
  copy(packageDir, "/lib/trellis");
  py.FS.writeFile("/data.json", fs.readFileSync(dataPath));
  console.log(await py.runPythonAsync(fs.readFileSync(sidePath, "utf8")));
})().catch(e => { console.error(e); process.exit(1); });
"""

_PYODIDE_SIDE = r"""
import json, sys, time
sys.path.insert(0, "/lib")
from trellis.model.tokenizer import Tokenizer
job = json.load(open("/data.json"))
started = time.perf_counter()
tok = Tokenizer(job["data"])
load_s = time.perf_counter() - started
json.dumps([sys.version_info[:2], load_s, [tok.encode(t) for t in job["texts"]],
            [tok.decode(tok.encode(t)) for t in job["texts"]]])
"""


def test_same_ids_under_pyodide(ours, data, tmp_path):
    """Gemma 3's tokenizer under Pyodide (CPython 3.14 in node, no numpy): the same ids and text."""
    import json
    import pathlib
    import shutil
    import subprocess

    root = pathlib.Path(__file__).resolve().parents[2]
    pyodide = root / "build" / "node" / "node_modules" / "pyodide"
    assert shutil.which("node") and (pyodide / "pyodide.js").exists(), \
        "node and the pyodide npm package come with `python3 build.py test`"
    texts = CORPUS[1:]
    (tmp_path / "job.json").write_text(json.dumps({"data": data, "texts": texts}))
    (tmp_path / "run.cjs").write_text(_PYODIDE_JS)
    (tmp_path / "side.py").write_text(_PYODIDE_SIDE)
    run = subprocess.run(["node", str(tmp_path / "run.cjs"), str(pyodide), str(root / "py" / "trellis"),
                          str(tmp_path / "job.json"), str(tmp_path / "side.py")],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    version, load_s, ids, decoded = json.loads(run.stdout.strip().splitlines()[-1])
    assert version[0] == 3 and version[1] >= 12
    assert ids == [ours.encode(t) for t in texts]
    assert decoded == texts
