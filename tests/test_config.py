"""Config files: defaults that work with none, strict keys, clear errors, and precedence."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from checks.gpu_memory.settings import GpuMemorySection
from checks.versions.settings import VersionsSection
from preflight.config import Config, with_overrides
from preflight.config_file import load_config
from preflight.errors import ConfigError


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "preflight.toml"
    path.write_text(text)
    return path


def test_no_config_gives_working_defaults() -> None:
    config = load_config(None)
    assert config.run.python == "python3"
    assert config.run.fanout == 64
    assert config.run.port == 29500
    assert config.section(VersionsSection).package_drift == "warn"
    assert 0 < config.section(GpuMemorySection).min_free_fraction < 1


def test_sections_and_expectations_are_read(tmp_path: Path) -> None:
    config = load_config(
        write(
            tmp_path,
            '[run]\nfanout = 8\ntimeout_s = 90\n[versions]\nstack_packages = ["deepspeed"]\n'
            'package_drift = "fail"\n[expect]\ntorch = "2.4"\ndriver = ">=535"\n',
        )
    )
    assert config.run.fanout == 8
    assert config.run.timeout_s == 90.0
    assert config.section(VersionsSection).stack_packages == ("deepspeed",)
    assert config.section(VersionsSection).package_drift == "fail"
    assert config.expect == {"torch": "2.4", "driver": ">=535"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[run]\nfanot = 8\n", "unknown key run.fanot"),
        ("[rnu]\n", "unknown section [rnu]"),
        ('[run]\nfanout = "many"\n', "run.fanout must be a whole number"),
        ("[run]\nfanout = -1\n", "run.fanout must not be negative"),
        ('[versions]\npackage_drift = "loud"\n', "versions.package_drift must be one of fail, warn, ignore"),
        ('[versions]\nstack_packages = "torch"\n', "versions.stack_packages must be a list of strings"),
        ("run = 3\n", "run must be a table"),
        ("[expect]\ntorch = true\n", "expect.torch must be a version string"),
    ],
)
def test_bad_values_name_the_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, text))
    assert str(caught.value).startswith(f"{tmp_path / 'preflight.toml'}:")
    assert message in str(caught.value)


def test_an_unknown_key_names_its_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"preflight.toml:2: unknown key versions.fanout_note"):
        load_config(write(tmp_path, "[versions]\nfanout_note = 1\n[run]\nfanot = 8\n"))


def test_toml_syntax_errors_name_the_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"preflight.toml:3: not valid TOML"):
        load_config(write(tmp_path, "[run]\nfanout = 4\ntimeout_s = \n"))


def test_missing_config_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.toml: no such config file"):
        load_config(tmp_path / "nope.toml")


def test_command_line_beats_environment_beats_file(tmp_path: Path) -> None:
    config = load_config(
        write(tmp_path, '[run]\nfanout = 8\ntimeout_s = 90\npython = "/opt/env/bin/python"\n')
    )
    environ = {"PREFLIGHT_FANOUT": "16", "PREFLIGHT_TIMEOUT": "45"}
    merged = with_overrides(config, {"fanout": 4, "timeout_s": None, "python": None}, environ)
    assert merged.run.fanout == 4  # command line
    assert merged.run.timeout_s == 45.0  # environment over file
    assert merged.run.python == "/opt/env/bin/python"  # file over default


def test_a_bad_environment_value_is_named() -> None:
    with pytest.raises(ConfigError, match="PREFLIGHT_FANOUT='lots' is not a number"):
        with_overrides(Config(), {}, {"PREFLIGHT_FANOUT": "lots"})


@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=200))
def test_any_text_loads_or_gives_a_one_line_error(text: str) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c.toml"
        path.write_text(text, encoding="utf-8")
        try:
            load_config(path)
        except ConfigError as exc:
            assert str(exc).startswith(str(path))
            assert "\n" not in str(exc)


def test_the_example_config_in_the_docs_is_valid(tmp_path: Path) -> None:
    page = (Path(__file__).parent.parent / "docs" / "configuration.md").read_text(encoding="utf-8")
    example = page.split("```toml\n", 1)[1].split("```", 1)[0]
    config = load_config(write(tmp_path, example))
    assert config.expect["torch"] == "2.4"
    assert config.section(GpuMemorySection).gpus_per_node == 8


def test_the_example_config_in_the_readme_is_valid(tmp_path: Path) -> None:
    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    example = readme.split("```toml\n", 1)[1].split("```", 1)[0]
    config = load_config(write(tmp_path, example))
    assert config.run.python == "/opt/venv/bin/python"
    assert config.expect["torch"] == "2.4"


def test_a_config_saved_with_a_byte_order_mark_reads_as_without(tmp_path: Path) -> None:
    path = tmp_path / "preflight.toml"
    path.write_bytes("\ufeff[run]\r\nport = 29600\r\n".encode())
    assert load_config(path).run.port == 29600
