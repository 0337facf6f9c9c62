"""Plugin contributions to the CLI, in-process with a fake plugin registered on the manager:
launch flags (shown only when installed, routed into the plugin's section, never over the
file unless given), config sections, config questions, subcommands, launchers."""

from __future__ import annotations

import types

import pytest
from accel import hookimpl, plugins
from accel.config import providers
from accel.config.resolution import resolve
from accel.errors import ConfigError
from accel_cli import launch
from accel_cli.questions import ScriptedAsk, ask_questions


def _fake_plugin(calls: list) -> types.ModuleType:
    module = types.ModuleType("fake_fsdp_plugin")

    @hookimpl
    def accel_launch_arguments(parser):
        parser.add_argument("--use_fsdp", action="store_true", help="use fake FSDP")
        parser.add_argument("--fsdp_offload_params", help="offload parameters")
        parser.add_argument("--fsdp_version", default="2", help="FSDP version")
        parser.add_argument("--fsdp_special", dest="fsdp_config.special", help="dotted dest")
        parser.add_argument("--use_deepspeed", action="store_true", help="a second selector")

    @hookimpl
    def accel_config_sections():
        def validate(section):
            calls.append(dict(section))
            return [] if str(section.get("fsdp_version", "2")) in ("1", "2") else ["bad version"]

        return {"fsdp_config": validate}

    @hookimpl
    def accel_config_questions(ask, config):
        if ask.confirm("Do you want to use FSDP?", False, key="use_fsdp"):
            config["distributed_type"] = "FSDP"
            config["fsdp_config"] = {
                "fsdp_version": ask.select(
                    "Version?", ["2", "1"], "2", key="fsdp_config.fsdp_version"
                )
            }

    class Hello:
        name = "hello"
        help = "say hello"

        def add_arguments(self, parser):
            parser.add_argument("--who", default="world")

        def run(self, args):
            print(f"hello {args.who}")
            return 0

    @hookimpl
    def accel_cli_commands():
        return [Hello()]

    for fn in (
        accel_launch_arguments,
        accel_config_sections,
        accel_config_questions,
        accel_cli_commands,
    ):
        setattr(module, fn.__name__, fn)
    return module


@pytest.fixture
def fake(monkeypatch, tmp_path):
    for name in list(__import__("os").environ):
        if name.startswith("ACCEL_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("ACCEL_PLUGINS", "")  # entry points: none
    monkeypatch.setenv("ACCEL_CONFIG_DIR", str(tmp_path / "cfg"))
    plugins.reset_plugin_manager()
    calls: list = []
    module = _fake_plugin(calls)
    plugins.get_plugin_manager().register(module, name="fake_fsdp")
    # the fake plugin stands in for the accel-fsdp distribution
    monkeypatch.setattr(
        providers, "_loaded_plugin_distributions", lambda: {"accel-cli", "accel-fsdp"}
    )
    yield calls
    plugins.reset_plugin_manager()


def test_plugin_flags_appear_in_help_only_when_installed(fake, monkeypatch):
    text = launch.build_parser().parser.format_help()
    assert "fake_fsdp options" in text and "--use_fsdp" in text and "--fsdp_version" in text
    plugins.reset_plugin_manager()
    assert "--use_fsdp" not in launch.build_parser().parser.format_help()


def test_plugin_flags_route_into_the_section_and_never_override_the_file(fake, tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "distributed_type: MULTI_CPU\nnum_processes: 2\n"
        "fsdp_config:\n  fsdp_version: 1\n  fsdp_offload_params: false\n"
    )
    ns, lp = launch.parse(
        ["--config_file", str(cfg), "--use_fsdp", "--fsdp_offload_params", "true",
         "--fsdp_special", "x", "train.py", "--fsdp_version", "9"]
    )  # fmt: skip
    assert ns.training_script_args == ["--fsdp_version", "9"]  # the script's own argument
    resolved = launch.resolve_from(ns, lp)
    assert resolved["distributed_type"] == "FSDP"
    assert str(resolved.source("distributed_type")) == "flag --use_fsdp"
    assert resolved.get("fsdp_config.fsdp_offload_params") == "true"
    assert str(resolved.source("fsdp_config.fsdp_offload_params")) == "flag --fsdp_offload_params"
    assert resolved.get("fsdp_config.fsdp_version") == 1  # from the file: the flag was not given
    assert resolved.source("fsdp_config.fsdp_version").kind == "file"
    assert resolved.get("fsdp_config.special") == "x"
    assert fake[-1]["fsdp_offload_params"] == "true"  # the plugin validated the merged section
    assert lp.plugin_flags["fsdp_version"].default == "2"


def test_plugin_validator_errors_name_the_section(fake, tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("fsdp_config:\n  fsdp_version: 7\n")
    ns, lp = launch.parse(["--config_file", str(cfg), "train.py"])
    with pytest.raises(ConfigError, match=r"c.yaml: fsdp_config: bad version"):
        launch.resolve_from(ns, lp)


def test_two_distributed_type_selectors_contradict(fake):
    ns, lp = launch.parse(["--use_fsdp", "--use_deepspeed", "train.py"])
    with pytest.raises(launch.UsageError, match="--use_fsdp and --use_deepspeed contradict"):
        launch.flags_from(ns, lp)
    ns, lp = launch.parse(["--use_fsdp", "--multi_gpu", "--cpu", "train.py"])
    assert launch.flags_from(ns, lp)["distributed_type"] == "FSDP"  # FSDP on CPU is fine


def test_plugin_questions_extend_the_questionnaire(fake):
    ask = ScriptedAsk({"distributed_type": "multi-GPU", "use_fsdp": True, "num_processes": 2})
    config = ask_questions(ask)
    assert config["distributed_type"] == "FSDP"
    assert config["fsdp_config"] == {"fsdp_version": "2"}
    assert ("use_fsdp", True) in ask.asked


def test_plugin_subcommand(fake, capsys):
    from accel_cli.main import run

    assert run(["hello", "--who", "accel"]) == 0
    assert capsys.readouterr().out == "hello accel\n"
    run(["--help"])
    assert "hello" in capsys.readouterr().out


def test_broken_plugin_flags_do_not_break_launch(fake):
    module = types.ModuleType("broken")

    @hookimpl
    def accel_launch_arguments(parser):
        raise RuntimeError("oops")

    module.accel_launch_arguments = accel_launch_arguments
    plugins.get_plugin_manager().register(module, name="broken")
    lp = launch.build_parser()
    assert any("broken: RuntimeError: oops" in e for e in lp.plugin_errors)
    assert "--use_fsdp" in lp.parser.format_help()


def test_launchers_chosen_by_priority_and_claims(fake):
    simple = launch.choose_launcher(
        {"compute_environment": "LOCAL_MACHINE", "num_machines": 1, "nproc_per_node": 1}
    )
    assert simple.name == "simple"
    multi = launch.choose_launcher(
        {"compute_environment": "LOCAL_MACHINE", "num_machines": 1, "nproc_per_node": 2}
    )
    assert multi.name == "torchrun"
    restarts = launch.choose_launcher(
        {
            "compute_environment": "LOCAL_MACHINE",
            "num_machines": 1,
            "nproc_per_node": 1,
            "max_restarts": 2,
        }
    )
    assert restarts.name == "torchrun"  # restarts need the elastic agent
    cmd = multi.command(
        {"num_machines": 2, "nproc_per_node": 2, "machine_rank": 1, "main_process_ip": "10.0.0.1",
         "main_process_port": 1234, "rdzv_backend": "c10d", "max_restarts": 0},
        ["train.py", "--x"],
    )  # fmt: skip
    assert cmd[3:] == [
        "--nproc_per_node", "2", "--nnodes", "2", "--rdzv_backend", "c10d", "--rdzv_endpoint",
        "10.0.0.1:1234", "--rdzv_id", "accel", "--node_rank", "1", "--max_restarts", "0",
        "--module", "accel.launchers.worker", "--script", "train.py", "--x",
    ]  # fmt: skip


def test_third_party_plugin_owns_a_new_section(fake, tmp_path):
    module = types.ModuleType("mytracker")
    seen = []

    @hookimpl
    def accel_config_sections():
        return {"mytracker_config": lambda section: seen.append(section) or []}

    module.accel_config_sections = accel_config_sections
    cfg = tmp_path / "c.yaml"
    cfg.write_text("mytracker_config:\n  project: demo\n")
    with pytest.raises(ConfigError, match="unknown key 'mytracker_config'"):
        resolve(config_file=cfg, environ={})
    plugins.get_plugin_manager().register(module, name="mytracker")
    resolved = resolve(config_file=cfg, environ={})
    assert resolved.get("mytracker_config.project") == "demo"
    assert seen == [{"project": "demo"}]


def test_plugin_environment_reaches_the_plan_and_the_launcher_has_the_last_word(
    fake, tmp_path, monkeypatch
):
    """``accel_launch_environment`` is the one way a plugin adds worker variables; the
    launcher builds the plan's environment from it and may override what it owns."""
    module = types.ModuleType("envplugin")

    @hookimpl
    def accel_launch_environment(config):
        return {"FAKE_VAR": config["mixed_precision"], "OMP_NUM_THREADS": "7"}

    module.accel_launch_environment = accel_launch_environment
    plugins.get_plugin_manager().register(module, name="envplugin")
    (tmp_path / "train.py").write_text("print('hi')\n")
    monkeypatch.chdir(tmp_path)

    two = launch.plan(["--cpu", "--num_processes", "2", "--mixed_precision", "bf16", "train.py"])
    plan = two["plan"]
    assert (plan.launcher, plan.num_processes, plan.nproc_per_node) == ("torchrun", 2, 2)
    assert plan.replace_process is False and plan.argv == two["command"]
    assert plan.environment["FAKE_VAR"] == "bf16"
    assert plan.environment["OMP_NUM_THREADS"] == "1"  # torchrun's one thread per process wins
    assert plan.environment["ACCEL_DISTRIBUTED_TYPE"] == "MULTI_CPU"
    assert plan.script == ["train.py"]

    one = launch.plan(["train.py", "--lr", "1"])["plan"]
    assert (one.launcher, one.num_processes, one.replace_process) == ("simple", 1, True)
    assert one.environment["OMP_NUM_THREADS"] == "7"  # the simple launcher sets no threads
    assert one.argv[1:] == ["train.py", "--lr", "1"]
