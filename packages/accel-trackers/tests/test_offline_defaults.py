"""When each tracker considers itself configured (online) and when it stays local."""

from __future__ import annotations

from accel_trackers.clearml_tracker import clearml_configured, split_key
from accel_trackers.comet_tracker import comet_configured
from accel_trackers.mlflow_tracker import mlflow_configured
from accel_trackers.wandb_tracker import wandb_configured


def test_wandb(workdir, monkeypatch):
    assert not wandb_configured({})
    assert wandb_configured({"mode": "online"})
    monkeypatch.setenv("WANDB_MODE", "offline")
    assert wandb_configured({})
    monkeypatch.delenv("WANDB_MODE")
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    assert wandb_configured({})
    monkeypatch.delenv("WANDB_API_KEY")
    netrc = workdir / "netrc"
    netrc.write_text("machine api.wandb.ai\n  login user\n  password secret\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    assert wandb_configured({})
    monkeypatch.setenv("WANDB_BASE_URL", "https://wandb.example.com")
    assert not wandb_configured({})


def test_comet(workdir, monkeypatch, tmp_path):
    assert not comet_configured({})
    assert comet_configured({"online": False})
    monkeypatch.setenv("COMET_API_KEY", "key")
    assert comet_configured({})
    monkeypatch.delenv("COMET_API_KEY")
    (tmp_path / "home" / ".comet.config").write_text("[comet]\napi_key=key\n")
    assert comet_configured({})


def test_mlflow(monkeypatch):
    assert not mlflow_configured(None)
    assert mlflow_configured("http://localhost:5000")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://localhost:5000")
    assert mlflow_configured(None)


def test_clearml(workdir, monkeypatch, tmp_path):
    assert not clearml_configured({})
    monkeypatch.setenv("CLEARML_OFFLINE_MODE", "0")
    assert clearml_configured({})
    monkeypatch.delenv("CLEARML_OFFLINE_MODE")
    (tmp_path / "home" / "clearml.conf").write_text("api {}\n")
    assert clearml_configured({})


def test_clearml_title_and_series():
    """As Accelerate: an ``eval_``/``test_``/``train_`` prefix is the series, other keys are ``train``."""
    assert split_key("eval_loss") == ("loss", "eval")
    assert split_key("test_acc") == ("acc", "test")
    assert split_key("train_loss") == ("loss", "train")
    assert split_key("eval/loss") == ("loss", "eval")
    assert split_key("loss") == ("loss", "train")
    assert split_key("training_loss") == ("training_loss", "train")
    assert split_key("eval_") == ("eval_", "train")
