"""`dse topologies` with SimAI files: written only where asked to overwrite, read back and drawn."""

from dse.cli.commands import main


def test_a_simai_topology_is_not_overwritten_without_force(tmp_path, capsys):
    path = tmp_path / "fabric.topo"
    path.write_text("someone's file\n")
    args = ["topologies", "--simai", str(path), "--family", "leaf-spine", "--num-gpus", "64"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--simai: " in err and "exists; allowed: a new file, or --force" in err
    assert path.read_text() == "someone's file\n"
    assert main([*args, "--force"]) == 0
    assert path.read_text().startswith("75 8 8 3 ")  # 64 GPUs + 8 NVSwitches + 2 leaves + 1 spine


def test_a_simai_topology_reads_back_drawn_and_counted(tmp_path, capsys):
    path = tmp_path / "fabric.topo"
    assert main(["topologies", "--simai", str(path), "--family", "fat-tree", "--num-gpus", "1024"]) == 0
    capsys.readouterr()
    assert main(["topologies", "--from-simai", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("SimAI topology fabric.topo: 1024 x H100 in 128 servers")
    # bill_of_materials(Fabric("fat-tree"), 1024): 32 leaves under 16 spines, 1024 links a tier
    assert "128 servers of 8 GPUs, 1024 NICs; switches per tier 32 / 16; links per tier 1024 / 1024 at 400 Gb/s" in out
    assert main(["topologies", "--from-simai", str(tmp_path)]) == 2
    assert "--from-simai" in capsys.readouterr().err


def test_a_simai_topology_is_priced_as_its_fabric_is(tmp_path, capsys):
    """Read back from a SimAI file, a leaf-spine fabric of 64 H100 costs what dse prices the
    family at: the bill of materials counted off the file is the family's own."""
    from dse.cost import default_price_book, ownership
    from simulators.hardware import get_gpu
    from simulators.network import Fabric

    path = tmp_path / "fabric.topo"
    assert main(["topologies", "--simai", str(path), "--family", "leaf-spine", "--num-gpus", "64"]) == 0
    capsys.readouterr()
    assert main(["topologies", "--from-simai", str(path), "--gpu", "H100-SXM"]) == 0
    owned = ownership(get_gpu("H100-SXM"), 64, Fabric("leaf-spine", nic_gbps=400), default_price_book())
    assert f"capex ${owned.capex_usd:,.0f}, IT power {owned.it_power_kw:,.1f} kW" in capsys.readouterr().out
