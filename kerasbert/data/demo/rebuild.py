"""Rebuild the demo data files from the Debian packages they come from.

    apt-get install --no-install-recommends python3.11-doc wordnet-base
    python -m kerasbert.data.demo.rebuild [--output_dir DIR]

Writes, byte for byte the same on every run (gzip with mtime 0 and no file name):

- pydocs-0000K-of-0000N.txt.gz: pretraining corpus from the Python 3.11 documentation
  sources (python3.11-doc), one sentence per line, a blank line between documents;
- wordnet_gloss-{train,dev,test}.tsv.gz: WordNet 3.0 (wordnet-base) synset definitions
  labelled with their lexicographer file, as `label<TAB>text` with a header line;
- wordnet_lexnames.txt: the 45 labels in lexicographer file number order;
- LICENSE.PSF.txt and LICENSE.WordNet.txt: the licences, from the packages' copyright files.
"""

import argparse
import gzip
import hashlib
import io
import os
import re
import subprocess
import sys

from kerasbert.data.demo import rst_prose

DEFAULT_OUTPUT_DIR = os.path.dirname(os.path.abspath(__file__))
PYDOC_DIR = "/usr/share/doc/python3.11/html/_sources"
PYDOC_COPYRIGHT = "/usr/share/doc/python3.11-doc/copyright"
WORDNET_DIR = "/usr/share/wordnet"
WORDNET_COPYRIGHT = "/usr/share/doc/wordnet-base/copyright"
LEXNAMES_MAN_PAGE = "/usr/share/man/man5/lexnames.5WN.gz"
APT_INSTALL = "apt-get install --no-install-recommends python3.11-doc wordnet-base"
# The package versions the shipped files were built from (Debian 12 "bookworm").
SOURCE_VERSIONS = {"python3.11-doc": "3.11.2-6+deb12u9", "wordnet-base": "1:3.0-37"}

CORPUS_SHARDS = 4
CORPUS_PATTERN = "pydocs-{:05d}-of-{:05d}.txt.gz"
CLASSIFICATION_PATTERN = "wordnet_gloss-{}.tsv.gz"
LABELS_FILE = "wordnet_lexnames.txt"
SPLITS = ("train", "dev", "test")
# The narrative parts of the documentation. Left out: library/, c-api/ and distutils/
# (API reference, mostly one-line descriptions of functions; 4 MB of the 6 MB of prose),
# includes/ (fragments) and the licence, copyright and contents pages.
INCLUDED_PAGES = ("tutorial/", "howto/", "reference/", "faq/", "extending/", "using/",
                  "install/", "installing/", "distributing/", "whatsnew/",
                  "about.rst.txt", "bugs.rst.txt", "glossary.rst.txt")
MIN_DOCUMENT_SENTENCES = 3


class MissingSourcesError(RuntimeError):
    """The Debian packages' files the demo data is built from are not installed."""


def check_sources(pydoc_dir=PYDOC_DIR, wordnet_dir=WORDNET_DIR, pydoc_copyright=PYDOC_COPYRIGHT,
                  wordnet_copyright=WORDNET_COPYRIGHT, lexnames_man_page=LEXNAMES_MAN_PAGE):
    """Raise MissingSourcesError naming the apt-get command if a source file is missing."""
    needed = [pydoc_dir, pydoc_copyright, wordnet_copyright, lexnames_man_page] + [
        os.path.join(wordnet_dir, "data." + pos) for pos in ("noun", "verb", "adj", "adv")]
    missing = [path for path in needed if not os.path.exists(path)]
    if missing:
        raise MissingSourcesError(
            "The demo data is built from Debian's python3.11-doc and wordnet-base packages; "
            "missing: %s. Install them with: apt-get update && %s" % (", ".join(missing), APT_INSTALL))


def installed_versions():
    """{package: installed version or None} for the packages in SOURCE_VERSIONS (via dpkg-query)."""
    versions = {}
    for package in SOURCE_VERSIONS:
        try:
            result = subprocess.run(["dpkg-query", "-W", "-f=${Status}\t${Version}", package],
                                    capture_output=True, text=True, check=False)
            status, _, version = result.stdout.partition("\t")
            versions[package] = version if status == "install ok installed" else None
        except OSError:                            # no dpkg: not a Debian system
            versions[package] = None
    return versions


def write_gzip(path, text):
    """Write text as UTF-8 to a reproducible gzip file (mtime 0, no file name)."""
    with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0,
                                               compresslevel=9) as out:
        out.write(text.encode("utf-8"))


def write_text(path, text):
    with open(path, "w", encoding="utf-8", newline="\n") as out:
        out.write(text)


def rst_pages(pydoc_dir):
    """Yield (relative path, text) of the documentation's reST sources in sorted order."""
    paths = []
    for root, _, files in os.walk(pydoc_dir):
        paths += [os.path.relpath(os.path.join(root, name), pydoc_dir).replace(os.sep, "/")
                  for name in files if name.endswith(".rst.txt")]
    for path in sorted(paths):
        if path.startswith(INCLUDED_PAGES):
            with open(os.path.join(pydoc_dir, path), encoding="utf-8") as f:
                yield path, f.read()


def corpus_documents(pydoc_dir):
    """The pretraining documents: lists of prose sentences, one per page section."""
    pages = list(rst_pages(pydoc_dir))
    refs = {}
    for _, text in pages:
        for label, title in rst_prose.heading_titles(text).items():
            refs.setdefault(label, title)
    documents = []
    for _, text in pages:
        documents += [sentences for _, sentences in
                      rst_prose.rst_documents(text, refs, MIN_DOCUMENT_SENTENCES)]
    return documents


def lexnames(man_page=LEXNAMES_MAN_PAGE):
    """The lexicographer file names in file number order, from the lexnames(5WN) man page."""
    with gzip.open(man_page, "rt", encoding="utf-8") as f:
        rows = re.findall(r"^(\d\d)\t(\S+)\s*\t", f.read(), re.M)
    names = [name for _, name in sorted(rows)]
    assert [int(number) for number, _ in sorted(rows)] == list(range(len(names))), rows
    return names


def definition(gloss):
    """The definition part of a gloss: the ';'-separated parts before the first quoted example."""
    parts = []
    for part in gloss.split(";"):
        part = " ".join(part.split())
        if part.startswith('"'):
            break
        if part:
            parts.append(part)
    return "; ".join(parts)


def split_of(key):
    """Deterministic ~80/10/10 split from a hash of the key."""
    bucket = int(hashlib.sha256(key.encode("utf-8")).hexdigest(), 16) % 10
    return "train" if bucket < 8 else SPLITS[bucket - 7]


def classification_examples(wordnet_dir=WORDNET_DIR, labels=None):
    """{split: [(label, text), ...]} from the WordNet data files.

    Each synset gives its definition labelled with its lexicographer file. A text that
    several synsets share appears once, or not at all if their labels differ. The split
    comes from a hash of the first such synset's id (POS letter and offset), and each
    split is ordered by that hash, so any prefix of a file is a random sample.
    """
    labels = labels or lexnames()
    seen = {}                                      # text -> (synset id, label) or None
    for pos in ("noun", "verb", "adj", "adv"):
        with open(os.path.join(wordnet_dir, "data." + pos), encoding="utf-8") as f:
            for line in f:
                if line.startswith("  "):          # the licence header
                    continue
                fields, gloss = line.split(" | ", 1)
                offset, lex_filenum = fields.split()[:2]
                text, label = definition(gloss), labels[int(lex_filenum)]
                if not text:
                    continue
                if text not in seen:
                    seen[text] = (pos[0] + offset, label)
                elif seen[text] and seen[text][1] != label:
                    seen[text] = None
    examples = {split: [] for split in SPLITS}
    for text, entry in seen.items():
        if entry:
            synset, label = entry
            digest = hashlib.sha256(synset.encode("utf-8")).hexdigest()
            examples[split_of(synset)].append((digest, label, text))
    return {split: [(label, text) for _, label, text in sorted(rows)] for split, rows in examples.items()}


def psf_licence(copyright_path=PYDOC_COPYRIGHT):
    """The 'Python License' section of python3.11-doc's copyright file."""
    with open(copyright_path, encoding="utf-8") as f:
        text = f.read()
    start = text.index("Python License\n==============")
    end = text.index("Licenses and Acknowledgements for Incorporated Software")
    return ("From /usr/share/doc/python3.11-doc/copyright (Debian package python3.11-doc).\n\n"
            + text[start:end].rstrip() + "\n")


def wordnet_licence(copyright_path=WORDNET_COPYRIGHT):
    """The WordNet 3.0 licence paragraph of wordnet-base's copyright file, unfolded."""
    with open(copyright_path, encoding="utf-8") as f:
        text = f.read()
    block = re.search(r"^License: WordNet3.0\n((?: .*\n)+)", text, re.M).group(1)
    lines = ["" if line == " ." else line[1:] for line in block.splitlines()]
    return ("From /usr/share/doc/wordnet-base/copyright (Debian package wordnet-base).\n\n"
            + "\n".join(lines).rstrip() + "\n")


def rebuild(output_dir=DEFAULT_OUTPUT_DIR, pydoc_dir=PYDOC_DIR, wordnet_dir=WORDNET_DIR,
            pydoc_copyright=PYDOC_COPYRIGHT, wordnet_copyright=WORDNET_COPYRIGHT,
            lexnames_man_page=LEXNAMES_MAN_PAGE):
    """Write every demo data file into output_dir and return their paths.

    Raises MissingSourcesError (naming the apt-get command) if the packages are absent.

    >>> import tempfile
    >>> paths = rebuild(tempfile.mkdtemp())  # doctest: +SKIP
    """
    check_sources(pydoc_dir, wordnet_dir, pydoc_copyright, wordnet_copyright, lexnames_man_page)
    os.makedirs(output_dir, exist_ok=True)
    written = []

    def out(name):
        written.append(os.path.join(output_dir, name))
        return written[-1]

    documents = corpus_documents(pydoc_dir)
    for shard in range(CORPUS_SHARDS):
        text = "\n".join("".join(s + "\n" for s in doc) for doc in documents[shard::CORPUS_SHARDS])
        write_gzip(out(CORPUS_PATTERN.format(shard, CORPUS_SHARDS)), text)

    labels = lexnames(lexnames_man_page)
    write_text(out(LABELS_FILE), "".join(label + "\n" for label in labels))
    for split, rows in classification_examples(wordnet_dir, labels).items():
        tsv = io.StringIO()
        tsv.write("label\ttext\n")
        tsv.writelines("%s\t%s\n" % row for row in rows)
        write_gzip(out(CLASSIFICATION_PATTERN.format(split)), tsv.getvalue())

    write_text(out("LICENSE.PSF.txt"), psf_licence(pydoc_copyright))
    write_text(out("LICENSE.WordNet.txt"), wordnet_licence(wordnet_copyright))
    return written


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output_dir", default=DEFAULT_OUTPUT_DIR,
                        help="where to write the files (default: the kerasbert.data.demo package)")
    parser.add_argument("--pydoc_dir", default=PYDOC_DIR, help="python3.11-doc's reST sources")
    parser.add_argument("--wordnet_dir", default=WORDNET_DIR, help="wordnet-base's database files")
    args = parser.parse_args(argv)
    try:
        paths = rebuild(args.output_dir, args.pydoc_dir, args.wordnet_dir)
    except MissingSourcesError as error:
        print("error: %s" % error, file=sys.stderr)
        return 1
    for path in paths:
        print("%9d  %s" % (os.path.getsize(path), path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
