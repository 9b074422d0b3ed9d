"""Chat templates under Pyodide (CPython 3.14 in node), with jinja2 and markupsafe from the site's
trellis.zip as the browser worker gets them: the same renderings as transformers."""

import json
import shutil
import subprocess
from pathlib import Path

from web.site import package_archive

from . import chat_template_cases as cases

PYODIDE = Path(__file__).resolve().parents[2] / "build" / "node" / "node_modules" / "pyodide"  # build.py test installs it
NAMES = ["smollm2", "meta-llama-Llama-3.1-8B-Instruct.jinja", "Qwen-Qwen3-0.6B.jinja",
         "mistralai-Mistral-Nemo-Instruct-2407.jinja", "Mistral-Small-3.2-24B-Instruct-2506.jinja",
         "google-gemma-2-2b-it.jinja"]

SCRIPT = r"""
const fs = require("fs");
const { loadPyodide } = require(process.argv[2] + "/pyodide.js");
(async () => {
  const py = await loadPyodide({ indexURL: process.argv[2] + "/" });
  py.unpackArchive(new Uint8Array(fs.readFileSync(process.argv[3])), "zip", { extractDir: "/trellis" });  // as the worker does
  py.globals.set("job", fs.readFileSync(process.argv[4], "utf8"));
  console.log(await py.runPythonAsync(`
import json, sys
from datetime import datetime
sys.path.insert(0, "/trellis")
import markupsafe
from trellis.errors import InvalidRequestError
from trellis.model.chat_template import ChatTemplate
job = json.loads(job)
out = {}
for key, (source, bos, eos, case) in job["cases"].items():
    t = ChatTemplate(source, bos_token=bos, eos_token=eos, now=lambda: datetime.fromisoformat(job["now"]))
    try:
        out[key] = {"text": t.render(case["messages"], tools=case.get("tools"), **case.get("variables", {}))}
    except InvalidRequestError as e:
        out[key] = {"error": str(e), "field": e.field}
json.dumps({"version": list(sys.version_info[:2]), "escape": str(markupsafe.escape("<&>")),
            "speedups": hasattr(markupsafe, "_speedups"), "out": out})
`));
})().catch(e => { console.error(e); process.exit(1); });
"""


def test_templates_render_under_pyodide_from_the_sites_archive(tmp_path):
    assert shutil.which("node") and (PYODIDE / "pyodide.js").exists(), \
        "node and the pyodide npm package come with `python3 build.py test`"
    records = json.loads(cases.DATA.read_text())
    job = {"now": cases.FIXED_NOW.isoformat(), "cases": {
        f"{name}::{conv}": [cases.template_source(name, records["smollm2_template"]), *cases.FAMILIES[name], case]
        for name in NAMES for conv, case in cases.CONVERSATIONS.items()}}
    (tmp_path / "job.json").write_text(json.dumps(job))
    (tmp_path / "run.cjs").write_text(SCRIPT)
    archive = package_archive(tmp_path / "trellis.zip")
    run = subprocess.run(["node", str(tmp_path / "run.cjs"), str(PYODIDE), str(archive), str(tmp_path / "job.json")],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["version"][0] == 3 and result["version"][1] >= 12
    assert result["escape"] == "&lt;&amp;&gt;" and not result["speedups"]  # pure-Python markupsafe
    for key, got in result["out"].items():
        expected = records["renderings"][key]
        if "text" in expected:
            assert got == expected, key
        else:
            assert got["field"] == "messages" and expected["error"] in got["error"], key
