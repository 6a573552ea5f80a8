"""History store: compact encoding, rollups with retention, and ``port_series``."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime

import pytest

from fabric.models import Fabric, Node, Port
from telemetry.models import CounterChunk, Resolution
from telemetry.services import history


def test_encoding_round_trip_precision_and_size():
    rng = random.Random(4)
    entries = {
        off: (
            rng.uniform(0, 5e10),
            rng.uniform(0, 5e10),
            rng.uniform(0, 1e6),
            rng.randrange(0, 70000),
            off % 8,
        )
        for off in range(0, 256, 3)
    }
    entries[9] = (None, None, None, 0, history.FLAG_STALE)
    blob = history.encode_chunk(entries)
    back = history.decode_chunk(blob)
    assert set(back) == set(entries)
    for off, (x, r, w, e, f) in entries.items():
        bx, br, bw, be, bf = back[off]
        if x is None:
            assert (bx, br, bw) == (None, None, None)
        else:
            for a, b in ((x, bx), (r, br), (w, bw)):
                assert b == pytest.approx(a, rel=2e-5)
        assert be == min(e, 0xFFFF) and bf == f
        assert history.decode_one(blob, off) == back[off]
    assert history.decode_one(blob, 1) is None
    assert history.decode_offsets(blob, [255, 1, 0, 9, 3]) == {k: back[k] for k in (255, 0, 9, 3)}
    # 12 bytes per port + 33 bytes header before compression; random data hardly compresses
    assert len(blob) <= 33 + 12 * len(entries) + 64


def test_bad_chunk_raises():
    with pytest.raises(ValueError):
        history.decode_chunk(__import__("zlib").compress(b"\x09" + bytes(32)))
    with pytest.raises(ValueError):
        history.encode_chunk({256: (1.0, 1.0, 1.0, 0, 0)})


@pytest.fixture
def port(db):
    fabric = Fabric.objects.create(name="hist")
    node = Node.objects.create(
        fabric=fabric, node_guid="0x0000000000000001", node_type="ca", description="h1"
    )
    return Port.objects.create(node=node, port_num=1, lid=5, rate_gbps=200.0)


@pytest.mark.django_db
def test_port_series_and_rollups(port, settings):
    settings.WEFT_XMIT_WAIT_TICK_NS = 1000.0
    base = 1_800_000_000  # a minute boundary (divisible by 60)
    base -= base % 3600
    fid = port.node.fabric_id
    rows = []
    for i in range(12):  # two minutes of 10-s samples
        entry = (1e9 * (i + 1), 2e9, 1000.0 * i, 1 if i == 5 else 0, history.FLAG_STALE if i == 7 else 0)
        if i == 7:
            entry = (None, None, None, 0, history.FLAG_STALE)
        rows += history.build_chunks(fid, base + 10 * i, [(port.pk, entry)])
    CounterChunk.objects.bulk_create(rows)
    start, end = datetime.fromtimestamp(base, UTC), datetime.fromtimestamp(base + 120, UTC)
    raw = history.port_series(port.pk, start, end, resolution="raw")
    assert raw["t"] == [base + 10 * i for i in range(12)]
    assert raw["xmit_bytes_per_s"][3] == pytest.approx(4e9, rel=2e-5)
    assert raw["utilisation"][3] == pytest.approx(4e9 / 25e9, rel=2e-5)  # 200 Gb/s = 25e9 B/s
    assert raw["congestion"][4] == pytest.approx(4000 * 1e-6, rel=2e-5)
    assert raw["xmit_bytes_per_s"][7] is None and raw["stale"][7] is True
    assert raw["errors"][5] == 1

    out = history.rollup(now=base + 3 * 3600 + 1)
    assert out["minute"] >= 2 and out["hour"] >= 1
    minute = history.port_series(port.pk, start, end, resolution="minute")
    assert minute["t"] == [base, base + 60]
    expect = sum(1e9 * (i + 1) for i in range(6)) / 6
    assert minute["xmit_bytes_per_s"][0] == pytest.approx(expect, rel=2e-5)
    second = [1e9 * (i + 1) for i in range(6, 12) if i != 7]
    assert minute["xmit_bytes_per_s"][1] == pytest.approx(sum(second) / len(second), rel=2e-5)
    assert minute["errors"] == [1, 0] and minute["stale"] == [False, True]
    hour = history.port_series(port.pk, start, datetime.fromtimestamp(base + 3600, UTC), resolution="hour")
    assert len(hour["t"]) == 1 and hour["resolution"] == "hour"
    # idempotent: a second rollup writes nothing new
    again = history.rollup(now=base + 3 * 3600 + 1)
    assert again["minute"] == 0 and again["hour"] == 0
    # retention: raw rows older than WEFT_HISTORY_RAW_HOURS are gone after a rollup far later
    settings.WEFT_HISTORY_RAW_HOURS = 1
    history.rollup(now=base + 2 * 3600)
    assert not CounterChunk.objects.filter(resolution=Resolution.RAW).exists()
    assert CounterChunk.objects.filter(resolution=Resolution.MINUTE).count() == 2
    assert all(not math.isnan(v) for v in minute["xmit_bytes_per_s"])


@pytest.mark.django_db
def test_port_series_rejects_unknown_resolution(port):
    now = datetime.now(UTC)
    with pytest.raises(ValueError):
        history.port_series(port.pk, now, now, resolution="weekly")


@pytest.mark.django_db
def test_ports_series_reads_several_ports_of_several_buckets_as_port_series_does(port):
    """``ports_series`` (one query, each chunk decoded once) answers what ``port_series`` answers
    per port: ports of one bucket and of another, one without history, one absent from a step."""
    fabric = port.node.fabric
    node = port.node
    other = Port.objects.create(node=node, port_num=2, lid=6, rate_gbps=100.0)
    far = Port.objects.create(
        pk=port.pk + 300, node=node, port_num=3, lid=7, rate_gbps=400.0
    )  # another bucket
    idle = Port.objects.create(node=node, port_num=4, lid=8, rate_gbps=100.0)
    assert far.pk >> history.BUCKET_SHIFT != port.pk >> history.BUCKET_SHIFT
    base = 1_800_000_000
    rows = []
    for k in range(3):
        entries = [(port.pk, (1e9 * (k + 1), 2e9, 5e5, k, 0)), (far.pk, (3e9, 1e9 * k, 0.0, 0, 1))]
        if k != 1:
            entries.append((other.pk, (7e9, 7e9, None, 2, 0)))
        rows += history.build_chunks(fabric.pk, base + 10 * k, sorted(entries))
    CounterChunk.objects.bulk_create(rows)
    start, end = datetime.fromtimestamp(base - 5, UTC), datetime.fromtimestamp(base + 100, UTC)
    ids = [port.pk, other.pk, far.pk, idle.pk]
    many = history.ports_series(ids, start, end, resolution="raw")
    assert sorted(many) == sorted(ids)
    for pk in ids:
        assert many[pk] == history.port_series(pk, start, end, resolution="raw")
    assert many[other.pk]["t"] == [base, base + 20] and many[far.pk]["stale"] == [True] * 3
    assert many[idle.pk]["t"] == [] and many[idle.pk]["resolution"] == "raw"
    assert many[port.pk]["errors"] == [0, 1, 2]
    assert history.ports_series([], start, end) == {}


def test_encode_chunk_is_the_per_value_float24_encoding():
    """The bulk encoder gives the bytes of the per-value one (``_f24``), NaN, None and inf included."""
    import random
    import struct
    import zlib

    from telemetry.services.history import _f24, encode_chunk

    rng = random.Random(3)
    pool = [None, 0.0, -0.0, 1.0, float("nan"), -float("nan"), float("inf"), -float("inf"), 3.3e38, 1e-45]
    for _ in range(200):
        entries = {
            off: (
                rng.choice([rng.uniform(-1e12, 1e12), rng.choice(pool)]),
                rng.choice([rng.uniform(0, 2.5e10), rng.choice(pool)]),
                rng.choice([rng.uniform(0, 1e6), rng.choice(pool)]),
                rng.choice([0, 2, 70000]),
                rng.randrange(0, 8),
            )
            for off in rng.sample(range(256), rng.randrange(0, 257))
        }
        mask = sum(1 << off for off in entries)
        body = b"".join(
            _f24(x) + _f24(r) + _f24(w) + struct.pack(">HB", min(e, 0xFFFF), f)
            for off, (x, r, w, e, f) in sorted(entries.items())
        )
        assert zlib.decompress(encode_chunk(entries)) == bytes([1]) + mask.to_bytes(32, "little") + body


def test_downsample_means_the_rates_keeps_the_peaks_and_sums_the_errors():
    """``downsample`` (pure): a bin's rates are the mean of the values it has (None when none),
    its utilisation and congestion the highest, its errors the sum, stale when any sample was;
    ``bin_width`` bounds the bins, on the resolution's own steps."""
    assert history.bin_width(Resolution.RAW, 0, 45, 2) == (0, 23)
    # 800 hours in at most 720 bins: 2-hour bins from the hour the window starts in
    assert history.bin_width(Resolution.HOUR, 5000, 5000 + 800 * 3600, 720) == (3600, 7200)
    assert history.bin_width(Resolution.MINUTE, 125, 245, 720) == (120, 60)  # fits: one step a bin
    with pytest.raises(ValueError):
        history.bin_width(Resolution.RAW, 0, 45, 0)
    series = {
        "t": [0, 10, 20, 30, 40],
        "xmit_bytes_per_s": [1.0, 3.0, None, None, None],
        "rcv_bytes_per_s": [2.0, 2.0, 8.0, 4.0, 6.0],
        "xmit_wait_per_s": [0.0, 0.0, 9.0, None, 1.0],
        "utilisation": [0.1, 0.5, None, 0.2, 0.3],
        "congestion": [0.0, 0.0, 0.4, None, 0.01],
        "errors": [1, 0, 2, 0, 7],
        "stale": [False, False, True, False, False],
        "resolution": "raw",
        "step_s": None,
    }
    got = history.downsample(series, 0, 23)
    assert got == {
        "t": [0, 23],
        "xmit_bytes_per_s": [2.0, None],
        "rcv_bytes_per_s": [4.0, 5.0],
        "xmit_wait_per_s": [3.0, 1.0],
        "utilisation": [0.5, 0.3],
        "congestion": [0.4, 0.01],
        "errors": [3, 7],
        "stale": [True, False],
        "resolution": "raw",
        "step_s": 23,
    }


@pytest.mark.django_db
def test_fit_resolution_reads_the_finest_kept_resolution_within_the_bound(port):
    """Six raw sweeps of the last minute and two per-hour rollups: a window of the last hour
    reads raw; one of the last eight hours does not (raw rows are kept 6 h: the six would cover
    its last minute only) and reads the rollups, as a window whose raw steps exceed the bound."""
    base = 1_800_000_000
    rows = []
    for k in range(6):
        rows += history.build_chunks(port.node.fabric_id, base + 10 * k, [(port.pk, (1e9, 1e9, 0.0, 0, 0))])
    for h in (2, 1):
        rows += history.build_chunks(
            port.node.fabric_id, base - h * 3600, [(port.pk, (2e9, 2e9, 0.0, 0, 0))], Resolution.HOUR
        )
    CounterChunk.objects.bulk_create(rows)
    bucket = [port.pk >> history.BUCKET_SHIFT]
    now = base + 60
    assert history.fit_resolution(bucket, base - 3600, now, 720, now=now) == (Resolution.RAW, False)
    assert history.fit_resolution(bucket, base - 8 * 3600, now, 720, now=now) == (Resolution.HOUR, False)
    assert history.fit_resolution(bucket, base - 3600, now, 3, now=now) == (Resolution.HOUR, False)
    # nothing fits: the finest kept one with steps, to be put in bins
    assert history.fit_resolution(bucket, base - 3 * 3600, now, 1, now=now) == (Resolution.RAW, True)
    assert history.fit_resolution(bucket, base + 100, now, 720, now=now) == (Resolution.RAW, False)  # none
    start, end = (datetime.fromtimestamp(x, UTC) for x in (base - 3 * 3600, now))
    (s,) = history.ports_series([port.pk], start, end, max_steps=2).values()
    assert (s["resolution"], s["step_s"]) == ("hour", 3600)
    assert s["xmit_bytes_per_s"] == pytest.approx([2e9, 2e9], rel=2e-5)
