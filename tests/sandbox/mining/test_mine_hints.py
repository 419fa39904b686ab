"""The --env-hint file: YAML or TOML, every key known, plain variables only, each wrong value named by its field."""

from __future__ import annotations

import pytest

from sandbox.mining.errors import MiningError
from sandbox.mining.hints import EnvHint, load_env_hint


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_yaml_hint_reads_every_field(tmp_path):
    path = write(tmp_path, "hint.yaml", """
python: "3.10"
base_image: registry.example/python:3.10-slim
system_packages: [libxml2-dev, gcc]
install: ["pip install -e .[test]", "pip install lxml"]
test_command: pytest -rA -x
env: {DJANGO_SETTINGS_MODULE: tests.settings, LANG: C.UTF-8}
""")
    hint = load_env_hint(path)
    assert hint == EnvHint(python="3.10", base_image="registry.example/python:3.10-slim",
                           system_packages=["libxml2-dev", "gcc"],
                           install=["pip install -e .[test]", "pip install lxml"], test_command="pytest -rA -x",
                           env={"DJANGO_SETTINGS_MODULE": "tests.settings", "LANG": "C.UTF-8"})


def test_toml_hint_reads_the_same(tmp_path):
    path = write(tmp_path, "hint.toml", 'python = "3.12"\ninstall = ["make deps"]\n[env]\nTZ = "UTC"\n')
    assert load_env_hint(path) == EnvHint(python="3.12", install=["make deps"], env={"TZ": "UTC"})


def test_unknown_keys_are_named_with_the_known_ones(tmp_path):
    path = write(tmp_path, "hint.yaml", "python: '3.11'\ninstal: [x]\ntests: pytest\n")
    with pytest.raises(MiningError) as caught:
        load_env_hint(path)
    assert str(caught.value) == (f"hint file {path}: unknown key(s) instal, tests (known: python, node, base_image, "
                                 "system_packages, install, test_command, env)")


@pytest.mark.parametrize("name", ["API_KEY", "github_token", "DB_PASSWORD", "AWS_SECRET_ACCESS_KEY", "MyKeyring"])
def test_secret_looking_variables_are_refused(tmp_path, name):
    path = write(tmp_path, "hint.yaml", f"env: {{{name}: value}}\n")
    with pytest.raises(MiningError, match=rf"hint file .*: env: {name} looks like a secret"):
        load_env_hint(path)


@pytest.mark.parametrize("text, field", [
    ("python: 3.11\n", "python"),  # a YAML float, not the string "3.11"
    ("python: '2.7'\n", "python"),
    ("install: pip install .\n", "install"),
    ("install: [1]\n", "install.0"),
    ('install: ["a\\nb"]\n', "install"),
    ("system_packages: ['Not A Package']\n", "system_packages"),
    ("env: {A: [1]}\n", "env.A"),
    ("base_image: 'Not An Image!'\n", "base_image"),
    ("test_command: ''\n", "test_command"),
])
def test_a_wrong_type_names_the_field(tmp_path, text, field):
    path = write(tmp_path, "hint.yml", text)
    with pytest.raises(MiningError, match=rf"^hint file {path}: {field}: "):
        load_env_hint(path)


@pytest.mark.parametrize("name, text, said", [
    ("hint.json", "{}", "unknown format .json"),
    ("hint.yaml", "- a\n- b\n", "expected a mapping"),
    ("hint.toml", "python = \n", "not valid TOML"),
    ("hint.yaml", "a: [\n", "not valid YAML"),
])
def test_unreadable_files_say_why(tmp_path, name, text, said):
    with pytest.raises(MiningError, match=said):
        load_env_hint(write(tmp_path, name, text))


def test_a_missing_file_is_one_line(tmp_path):
    with pytest.raises(MiningError, match=r"hint file .*nothing.yaml: cannot be read: No such file"):
        load_env_hint(tmp_path / "nothing.yaml")


def test_an_empty_yaml_file_is_no_setting(tmp_path):
    assert load_env_hint(write(tmp_path, "hint.yaml", "")) == EnvHint()
