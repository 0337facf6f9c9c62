"""`accel merge-weights` / `accel estimate-memory`: progress bars on a terminal (a real pty,
none in a pipe), `estimate-memory --format`, and the output shown in the docs.

The docs include ``docs/_snippets/estimate-memory-*.txt``; the test below checks they equal a
fresh run (``ACCEL_UPDATE_DOCS_SNIPPETS=1`` rewrites them).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from accel.testing.terminal import environment_without_accel, run_on_terminal

sys.path.insert(0, str(Path(__file__).parent))
from test_tools import BERT_BASE_CASED, GPT2, TINY_LLAMA  # noqa: E402

pytestmark = [pytest.mark.timeout(300), pytest.mark.usefixtures("without_transformers")]
ACCEL = Path(sys.executable).with_name("accel")
SNIPPETS = Path(__file__).resolve().parents[3] / "docs" / "_snippets"


def on_terminal(argv: list[str], cwd: Path, timeout: float = 240) -> tuple[int, str]:
    """``argv`` on a pseudo-terminal of 120 columns, with no plugin loaded; (status, output)."""
    return run_on_terminal(argv, cwd, environment_without_accel(ACCEL_PLUGINS=""), timeout)


@pytest.fixture
def configs(tmp_path) -> list[str]:
    names = []
    for name, config in (
        ("bert-base-cased", BERT_BASE_CASED),
        ("gpt2", GPT2),
        ("tiny", TINY_LLAMA),
    ):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps(config))
        names.append(name)
    return names


def test_estimate_memory_over_several_models_shows_a_bar_on_a_terminal(tmp_path, configs, accel):
    status, out = on_terminal([str(ACCEL), "estimate-memory", *configs], tmp_path)
    assert status == 0, out
    assert "Estimating memory: 100%" in out and "3/3" in out, out
    assert all(f"Memory Usage for loading `{name}`" in out for name in configs)
    piped = accel("estimate-memory", *configs, "--format", "json")
    assert piped.returncode == 0, piped.stderr
    assert "Estimating memory" not in piped.stderr
    reports = json.loads(piped.stdout)
    assert [r["model"] for r in reports] == configs
    # tiny llama, float32: 175,040 parameters + 16 rotary buffer values
    assert reports[2]["rows"][0]["total_size"] == 175_056 * 4


def test_estimate_memory_markdown_and_json_formats(accel, configs):
    md = accel("estimate-memory", "tiny", "--format", "markdown", "--dtypes", "float32")
    assert md.returncode == 0, md.stderr
    lines = md.stdout.splitlines()
    assert lines[0] == "Memory usage for loading `tiny`:"
    assert lines[2] == "| dtype | Largest Layer | Total Size | Training using Adam |"
    assert lines[3] == "|:---|---:|---:|---:|"
    assert lines[4] == "| float32 | 250.0 KB | 683.81 KB | 2.67 MB |"
    js = accel("estimate-memory", "tiny", "--format", "json")
    assert js.returncode == 0, js.stderr
    assert js.stdout == accel("estimate-memory", "tiny", "--json").stdout
    assert json.loads(js.stdout)["model"] == "tiny"  # one model: one object
    both = accel("estimate-memory", "tiny", "--json", "--format", "table")
    assert both.returncode == 2 and "disagree" in both.stderr


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_docs_show_the_real_output(accel, configs, fmt):
    out = accel("estimate-memory", "bert-base-cased", "--format", fmt)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    if fmt == "table":  # where the config came from depends on whether transformers is installed
        text = "\n".join(ln for ln in text.splitlines() if not ln.startswith("Loading")) + "\n"
    snippet = SNIPPETS / f"estimate-memory-{fmt}.txt"
    if os.environ.get("ACCEL_UPDATE_DOCS_SNIPPETS") == "1":
        snippet.write_text(text)
    assert snippet.read_text() == text, (
        f"{snippet} is stale: rerun with ACCEL_UPDATE_DOCS_SNIPPETS=1"
    )


def test_merge_weights_shows_a_bar_over_the_checkpoint_files(tmp_path):
    import torch
    import torch.distributed.checkpoint as dcp
    from safetensors.torch import load_file

    model = torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(4)])
    ckpt = tmp_path / "sharded"
    with pytest.warns(UserWarning):  # no process group: DCP saves as one process
        dcp.save(
            {"model": model.state_dict()},
            storage_writer=dcp.FileSystemWriter(str(ckpt), thread_count=3),
        )
    files = sorted(p.name for p in ckpt.glob("*.distcp"))
    assert len(files) == 3, files
    status, out = on_terminal(
        [str(ACCEL), "merge-weights", str(ckpt), str(tmp_path / "out")], tmp_path
    )
    assert status == 0, out
    assert "Merging shards: 100%" in out and "3/3" in out, out
    assert "Merged 8 tensors" in out
    merged = load_file(tmp_path / "out" / "model.safetensors")
    assert all(torch.equal(merged[k], v) for k, v in model.state_dict().items())
