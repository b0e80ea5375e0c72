#!/usr/bin/env python3
"""Writes models/tokenizer_unicode_tables.inc: the Unicode data of the BERT normalizer and
pre-tokenizer (models/tokenizer_unicode.h), which Hugging Face `tokenizers` runs for WordPiece
tokenizers (BertNormalizer, BertPreTokenizer), of its NFD, NFC, NFKD and NFKC normalizers, and of
its Digits pre-tokenizer (Cohere's byte-level BPE).

The data is Python's `unicodedata` (its Unicode version is printed and written into the file):
  - control: general category C* but Cn, plus U+0000 and U+FFFD (what clean_text removes;
    \\t \\n \\r are whitespace instead),
  - whitespace: the White_Space property (PropList.txt; Rust's char::is_whitespace),
  - punctuation: ASCII 33-47, 58-64, 91-96, 123-126 and general category P*,
  - nonspacing marks: general category Mn (what strip_accents drops after NFD),
  - NFD: each code point's full canonical decomposition (Hangul syllables are algorithmic and
    left to the C++), and the canonical combining classes that order marks,
  - NFKD: each code point's full compatibility decomposition, where it differs from the canonical
    one (the C++ falls back to NFD's table),
  - NFC: the primary composites, as (first, second) -> composite: each code point whose canonical
    decomposition mapping is two code points and that NFC leaves alone (which leaves out the
    composition exclusions and the non-starter decompositions; singletons map to one code point);
    Hangul syllables compose algorithmically in the C++,
  - numeric: general category N* (Rust's char::is_numeric, which the Digits pre-tokenizer splits at),
  - lowercase: each code point's full lowercase mapping (str.lower of one character).

`tokenizers` is the reference these tables must reproduce, and its Rust crates carry their own,
older Unicode tables: unassigned code points (Cn) are not control to it, and characters assigned
since (new Arabic marks, Egyptian hieroglyph format controls, new punctuation) keep their old
class. Its normalizers (the unicode-normalization-alignments crate) are older still than Python's
tables (marks assigned since have combining class 0 there and compose with nothing; U+11938 does
not decompose), while lowercase and is_numeric come from Rust's standard library, newer than
Python's (Kawi and Kaktovik digits are numeric). So the script probes the library on every code
point (clean_text, BertPreTokenizer, strip_accents, NFD, NFKD, Digits, lowercase of one character),
on each combining mark after and before marks of known class, and on each primary composite's two
code points, and takes its answer where it differs from unicodedata's; it prints how many code
points each table took from the library.

Run from anywhere: python3 scripts/make_unicode_tables.py (it uses make_fixtures.py's virtual
environment, .brigade/fixtures-venv). The output is committed; CI never runs this.
"""
import sys
import unicodedata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_fixtures import ROOT, ensure_venv  # noqa: E402

OUT = ROOT / "models" / "tokenizer_unicode_tables.inc"
N_CODE_POINTS = 0x110000
SURROGATES = range(0xD800, 0xE000)
# PropList.txt's White_Space (unchanged since Unicode 6.3).
WHITE_SPACE = [0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B),
               0x2028, 0x2029, 0x202F, 0x205F, 0x3000]
HANGUL = range(0xAC00, 0xAC00 + 11172)


def code_points():
    return (cp for cp in range(N_CODE_POINTS) if cp not in SURROGATES)


def from_unicodedata():
    """Each class as a set of code points and the mappings as dicts, from unicodedata alone."""
    control, punct, mn, nfd, ccc, lower = set(), set(), set(), {}, {}, {}
    nfkd, numeric, compose = {}, set(), {}
    for cp in code_points():
        c = chr(cp)
        cat = unicodedata.category(c)
        if (cat[0] == "C" and cat != "Cn" and c not in "\t\n\r") or cp in (0, 0xFFFD):
            control.add(cp)
        if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126 or cat[0] == "P":
            punct.add(cp)
        if cat == "Mn":
            mn.add(cp)
        if unicodedata.combining(c):
            ccc[cp] = unicodedata.combining(c)
        d = unicodedata.normalize("NFD", c)
        if d != c and cp not in HANGUL:
            nfd[cp] = [ord(x) for x in d]
        k = unicodedata.normalize("NFKD", c)
        if k != d and cp not in HANGUL:
            nfkd[cp] = [ord(x) for x in k]
        if cat[0] == "N":
            numeric.add(cp)
        mapping = unicodedata.decomposition(c).split()
        if len(mapping) == 2 and not mapping[0].startswith("<") and unicodedata.normalize("NFC", c) == c:
            compose[tuple(int(x, 16) for x in mapping)] = cp
        if c.lower() != c:
            lower[cp] = [ord(x) for x in c.lower()]
    return control, set(WHITE_SPACE), punct, mn, nfd, ccc, lower, nfkd, numeric, compose


def reconcile(name, ours, theirs, universe):
    """`ours` with the library's answer (`theirs`) for each code point in `universe` where they
    differ; prints how many."""
    changed = [cp for cp in universe if (cp in ours) != (cp in theirs)]
    for cp in changed:
        if cp in theirs:
            ours.add(cp)
        else:
            ours.discard(cp)
    print(f"{name}: {len(ours)} code points, {len(changed)} taken from tokenizers "
          f"(e.g. {', '.join(f'U+{cp:04X}' for cp in changed[:6])})")


def reconcile_map(name, ours, theirs, keys=None):
    changed = [k for k in (keys if keys is not None else code_points()) if ours.get(k) != theirs.get(k)]
    for k in changed:
        if k in theirs:
            ours[k] = theirs[k]
        else:
            ours.pop(k, None)

    def show(k):
        return "+".join(f"U+{cp:04X}" for cp in k) if isinstance(k, tuple) else f"U+{k:04X}"
    print(f"{name}: {len(ours)} entries, {len(changed)} taken from tokenizers "
          f"(e.g. {', '.join(show(k) for k in changed[:6])})")


def probe_tokenizers(nfd):
    """The classes and mappings as the reference library applies them to each single code point."""
    from tokenizers import normalizers, pre_tokenizers

    def bert(**kw):
        args = dict(clean_text=False, handle_chinese_chars=False, strip_accents=False, lowercase=False)
        args.update(kw)
        return normalizers.BertNormalizer(**args)
    clean, strip, low = bert(clean_text=True), bert(strip_accents=True), bert(lowercase=True)
    hf_nfd, hf_nfkd = normalizers.NFD(), normalizers.NFKD()
    pre, digits = pre_tokenizers.BertPreTokenizer(), pre_tokenizers.Digits(individual_digits=True)
    control, white, punct, mn, decomp, lower = set(), set(), set(), set(), {}, {}
    compat, numeric = {}, set()
    for cp in code_points():
        c = chr(cp)
        cleaned = clean.normalize_str(c)
        if cleaned == "":
            control.add(cp)
        elif cleaned == " " and cp != 0x20:
            white.add(cp)
        if len(pre.pre_tokenize_str("a" + c + "a")) == 3:
            punct.add(cp)
        d = hf_nfd.normalize_str(c)
        if d != c and cp not in HANGUL:
            decomp[cp] = [ord(x) for x in d]
        k = hf_nfkd.normalize_str(c)
        if k != d and cp not in HANGUL:
            compat[cp] = [ord(x) for x in k]
        if len(digits.pre_tokenize_str("a" + c + "a")) == 3:
            numeric.add(cp)
        if cp not in nfd and strip.normalize_str(c) == "":
            mn.add(cp)
        lo = low.normalize_str(c)
        if lo != c:
            lower[cp] = [ord(x) for x in lo]
    white.add(0x20)
    return control, white, punct, mn, decomp, lower, compat, numeric


def probe_combining_classes(ccc, nfd):
    """unicodedata's combining classes as the library orders marks: a mark it orders after U+0345
    (class 240) and before U+0334 (class 1) as unicodedata's class says keeps it; one it does not
    reorder at all is unassigned there (class 0). Decomposing code points never reach ordering."""
    from tokenizers import normalizers
    hf_nfd = normalizers.NFD()
    theirs = {}
    for cp, k in ccc.items():
        c = chr(cp)
        if cp in nfd:
            theirs[cp] = k
            continue
        mark_first, mark_last = "a\u0345" + c, "a" + c + "\u0334"
        after, before = hf_nfd.normalize_str(mark_first), hf_nfd.normalize_str(mark_last)
        want_after = "a" + c + "\u0345" if k < 240 else mark_first
        want_before = "a\u0334" + c if k > 1 else mark_last
        if after == want_after and before == want_before:
            theirs[cp] = k
        elif after != mark_first or before != mark_last:
            sys.exit(f"U+{cp:04X}: tokenizers orders it neither as class {k} nor as class 0")
    return theirs


def probe_compositions(compose):
    """The primary composites the library's NFC makes of their two code points."""
    from tokenizers import normalizers
    hf_nfc = normalizers.NFC()
    return {pair: cp for pair, cp in compose.items() if hf_nfc.normalize_str(chr(pair[0]) + chr(pair[1])) == chr(cp)}


def ranges(cps):
    """Sorted code points as [first, last] runs."""
    out = []
    for cp in sorted(cps):
        if out and out[-1][1] + 1 == cp:
            out[-1][1] = cp
        else:
            out.append([cp, cp])
    return out


def lower_runs(lower):
    """Single-code-point lowercase mappings as runs {first, last, delta, stride}: every stride-th
    code point from first to last maps to itself + delta (Latin Extended pairs alternate)."""
    single = sorted((cp, m[0] - cp) for cp, m in lower.items() if len(m) == 1)
    runs = []
    for cp, delta in single:
        if runs:
            r = runs[-1]
            stride = cp - r[1]
            if r[2] == delta and ((r[0] == r[1] and stride in (1, 2)) or stride == r[3]):
                r[1], r[3] = cp, stride
                continue
        runs.append([cp, cp, delta, 1])
    return runs


def c_array(decl, rows, per_line):
    lines = [decl + " = {"]
    for i in range(0, len(rows), per_line):
        lines.append("    " + " ".join(rows[i:i + per_line]))
    lines.append("};")
    return "\n".join(lines)


def decomposition_table(name, data_name, table):
    """table as Decomposition rows {cp, offset, n} into one array of code points."""
    rows, data = [], []
    for cp in sorted(table):
        rows.append(f"{{0x{cp:X}, {len(data)}, {len(table[cp])}}},")
        data.extend(table[cp])
    assert len(data) < 1 << 16 and max(map(len, table.values())) < 1 << 8, "Decomposition's field widths"
    return (c_array(f"constexpr Decomposition {name}[]", rows, 5) + "\n\n" +
            c_array(f"constexpr char32_t {data_name}[]", [f"0x{x:X}," for x in data], 10))


def write(control, white, punct, mn, nfd, ccc, lower, nfkd, numeric, compose):
    def range_table(name, cps, what):
        rows = [f"{{0x{a:X}, 0x{b:X}}}," for a, b in ranges(cps)]
        return f"// {what}\n" + c_array(f"constexpr CodePointRange {name}[]", rows, 6)
    multi = {cp: m for cp, m in lower.items() if len(m) > 1}
    ccc_runs = []
    for cp in sorted(ccc):
        if ccc_runs and ccc_runs[-1][1] + 1 == cp and ccc_runs[-1][2] == ccc[cp]:
            ccc_runs[-1][1] = cp
        else:
            ccc_runs.append([cp, cp, ccc[cp]])
    parts = [
        "// Generated by scripts/make_unicode_tables.py from Python's unicodedata "
        f"(Unicode {unicodedata.unidata_version}),\n// corrected to Hugging Face tokenizers where its "
        "tables differ. Do not edit.",
        range_table("kControl", control, "clean_text removes these: C* but Cn, U+0000, U+FFFD; not \\t \\n \\r."),
        range_table("kWhiteSpace", white, "White_Space."),
        range_table("kPunctuation", punct, "BertPreTokenizer's punctuation: ASCII 33-47, 58-64, 91-96, 123-126, P*."),
        range_table("kNonspacingMark", mn, "Mn: strip_accents drops these after NFD."),
        "// Canonical combining classes other than 0.\n" + c_array(
            "constexpr CombiningClassRange kCombiningClass[]",
            [f"{{0x{a:X}, 0x{b:X}, {c}}}," for a, b, c in ccc_runs], 5),
        "// Full canonical decompositions (but Hangul syllables): kNfdData[offset, offset + n).\n" +
        decomposition_table("kNfd", "kNfdData", nfd),
        "// Full compatibility decompositions where they differ from the canonical ones:\n"
        "// kNfkdData[offset, offset + n).\n" + decomposition_table("kNfkd", "kNfkdData", nfkd),
        "// Primary composites: first, second, composite; sorted by (first, second).\n" + c_array(
            "constexpr Composition kComposition[]",
            [f"{{0x{a:X}, 0x{b:X}, 0x{c:X}}}," for (a, b), c in sorted(compose.items())], 4),
        range_table("kNumeric", numeric, "Rust's char::is_numeric (N*): what the Digits pre-tokenizer splits at."),
        "// Single-code-point lowercase mappings: first, last, delta, stride.\n" + c_array(
            "constexpr LowercaseRun kLowercase[]", [f"{{0x{a:X}, 0x{b:X}, {d}, {s}}}," for a, b, d, s in lower_runs(lower)], 4),
        "// Lowercase mappings to more than one code point (at most 3).\n" + c_array(
            "constexpr LowercaseMulti kLowercaseMulti[]",
            [f"{{0x{cp:X}, {{{', '.join(f'0x{x:X}' for x in m)}}}, {len(m)}}}," for cp, m in sorted(multi.items())], 2),
    ]
    OUT.write_text("\n\n".join(parts) + "\n", encoding="utf-8")
    print(f"{OUT.relative_to(ROOT)}: {OUT.stat().st_size / 1024:.0f} KiB")


def main():
    ensure_venv(__file__)
    import tokenizers
    print(f"unicodedata {unicodedata.unidata_version}, tokenizers {tokenizers.__version__}")
    control, white, punct, mn, nfd, ccc, lower, nfkd, numeric, compose = from_unicodedata()
    hf_control, hf_white, hf_punct, hf_mn, hf_nfd, hf_lower, hf_nfkd, hf_numeric = probe_tokenizers(nfd)
    everything = list(code_points())
    reconcile("control", control, hf_control, everything)
    reconcile("whitespace", white, hf_white, [cp for cp in everything if cp not in hf_control])
    reconcile("punctuation", punct, hf_punct, [cp for cp in everything if cp not in hf_white])
    reconcile("nonspacing mark", mn, hf_mn, [cp for cp in everything if cp not in nfd])
    reconcile_map("NFD", nfd, hf_nfd)
    reconcile_map("NFKD", nfkd, hf_nfkd)
    reconcile_map("combining class", ccc, probe_combining_classes(ccc, nfd), keys=list(ccc))
    reconcile_map("NFC composition", compose, probe_compositions(compose), keys=list(compose))
    reconcile("numeric", numeric, hf_numeric, everything)
    reconcile_map("lowercase", lower, hf_lower)
    write(control, white, punct, mn, nfd, ccc, lower, nfkd, numeric, compose)


if __name__ == "__main__":
    main()
