"""The committed host profiles: each loads, and the published S0 testbed's
profile is exactly the simulator's S0 calibration (naming it changes nothing)."""

from __future__ import annotations

import json

import pytest

from vhpc import paths, sim
from vhpc.host import profile as prof

PROFILES = sorted((paths.REPO / "profiles").glob("*.toml"))
S0_SCENARIOS = sorted((paths.REPO / "scenarios").glob("s0-*.toml"))


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: p.stem)
def test_every_committed_profile_loads_and_overlays(path):
    profile = prof.load_profile(path)
    assert profile["profile"]["name"] == path.stem
    assert sim.overlay(profile, "mpich")["mpi"]


@pytest.mark.parametrize("path", S0_SCENARIOS, ids=lambda p: p.stem)
def test_naming_the_s0_profile_reproduces_s0_unchanged(path):
    text = path.read_text()
    named = text.replace("[host]\n", '[host]\nprofile = "xen-s0-core2duo"\n', 1)
    assert named != text
    plain = sim.run_text(text, str(path), seed=1).report
    resolved = sim.run_text(named, str(path), seed=1).report  # resolves host.profile
    assert json.dumps(resolved, sort_keys=True) == json.dumps(plain, sort_keys=True)


def test_a_published_profile_names_what_it_lacks(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[profile]\nname = "x"\ndescription = "d"\nformat = 1\nkind = "published"\n'
                   '[provenance]\nsource = "s"\ncpu_model = "c"\n')
    with pytest.raises(prof.ProfileError) as err:
        prof.load_profile(bad)
    assert f"{bad}: provenance.derivation: missing" in err.value.message
    assert "parameters: missing" in err.value.message
    bad.write_text('[profile]\nname = "x"\ndescription = "d"\nformat = 1\nkind = "guessed"\n')
    with pytest.raises(prof.ProfileError, match="profile.kind"):
        prof.load_profile(bad)


def test_a_lab_experiment_is_not_predicted_on_a_published_testbed():
    from click.testing import CliRunner

    from vhpc.cli import main

    result = CliRunner().invoke(main, ["lab", "predict",
                                       str(paths.REPO / "experiments" / "s0-quick.toml"),
                                       "--profile", str(paths.REPO / "profiles" /
                                                        "xen-s0-core2duo.toml")])
    assert result.exit_code != 0
    assert "published testbed" in result.output and "vhpc calibrate" in result.output
