"""Word banks for the demo dataset: names, institutions, categories, titles and abstracts."""

from __future__ import annotations

import functools
import itertools
import random
from collections.abc import Sequence

# ------------------------------------------------------------------------------------------------ people

# (given names, family names, how the full name is written); weights are shares of researchers.
_CULTURES: list[tuple[float, Sequence[str], Sequence[str], str]] = [
    (
        0.14,
        [
            "John",
            "Michael",
            "Sarah",
            "Emily",
            "David",
            "Jennifer",
            "Robert",
            "Laura",
            "James",
            "Rachel",
            "Andrew",
            "Katherine",
            "Thomas",
            "Hannah",
            "Daniel",
            "Olivia",
            "Matthew",
            "Megan",
        ],
        [
            "Smith",
            "Johnson",
            "Williams",
            "Brown",
            "Taylor",
            "Anderson",
            "Clarke",
            "Harris",
            "Walker",
            "Mitchell",
            "O'Connor",
            "McAllister",
            "Thompson",
            "Robinson",
            "Bennett",
            "Fitzgerald",
        ],
        "western",
    ),
    (
        0.07,
        ["Jürgen", "Jana", "Lukas", "Anna", "Matthias", "Sophie", "Björn", "Käthe", "Stefan", "Lena", "Jörg"],
        ["Müller", "Schröder", "Weiß", "Fischer", "Becker", "Hoffmann", "Schäfer", "Krüger", "Groß", "Vogel"],
        "western",
    ),
    (
        0.06,
        ["François", "Hélène", "Jérôme", "Amélie", "Benoît", "Céline", "Loïc", "Élodie", "Stéphane", "Noémie"],
        ["Lefèvre", "Moreau", "Dubois", "Girard", "Rousseau", "Bérard", "Faure", "Lemaître", "Chevalier", "Mercier"],
        "western",
    ),
    (
        0.06,
        ["José", "María", "Jesús", "Lucía", "Andrés", "Begoña", "Íñigo", "Sofía", "Ramón", "Águeda"],
        ["Ñúñez", "García", "Fernández", "Peña", "Martínez", "Gómez", "Sánchez", "Muñoz", "Ibáñez", "Pérez"],
        "western",
    ),
    (
        0.03,
        ["João", "Inês", "Gonçalo", "Conceição", "Tomás", "Beatriz"],
        ["Gonçalves", "Magalhães", "Conceição", "Araújo", "Simões", "Brandão"],
        "western",
    ),
    (
        0.03,
        ["Giuseppe", "Francesca", "Niccolò", "Chiara", "Lorenzo", "Giulia"],
        ["Rossi", "Bianchi", "De Luca", "Esposito", "Fabbri", "Lombardi"],
        "western",
    ),
    (
        0.03,
        ["Søren", "Åsa", "Bjørn", "Ingrid", "Mikael", "Märta"],
        ["Åström", "Sørensen", "Lindqvist", "Ødegård", "Nyström", "Hansen"],
        "western",
    ),
    (
        0.03,
        ["Łukasz", "Małgorzata", "Paweł", "Zofia", "Jiří", "Kateřina", "Miloš"],
        ["Wójcik", "Kowalczyk", "Dvořák", "Novák", "Świątek", "Procházková", "Jankowski"],
        "western",
    ),
    (0.02, ["Mehmet", "Ayşe", "Gül", "Çağrı", "Emre"], ["Şahin", "Yılmaz", "Öztürk", "Çelik", "Doğan"], "western"),
    (0.02, ["Pál", "Zsófia", "Gábor", "Réka"], ["Erdős", "Szabó", "Kovács", "Tóth"], "western"),
    (
        0.16,
        [
            "Wei",
            "Jing",
            "Hao",
            "Xiaoming",
            "Yan",
            "Lei",
            "Min",
            "Jun",
            "Ying",
            "Zhiwei",
            "Wumo",
            "Xin",
            "Yu",
            "Qiang",
            "Li",
            "Fang",
            "Tao",
            "Hui",
        ],
        ["Wang", "Li", "Zhang", "Liu", "Chen", "Yang", "Huang", "Zhao", "Wu", "Zhou", "Xu", "Sun", "Yan", "Ma"],
        "western",
    ),
    (0.02, ["伟", "静", "浩", "敏", "磊", "芳"], ["王", "李", "张", "刘", "陈", "杨"], "eastern"),
    (
        0.05,
        ["Yuki", "Haruto", "Sakura", "Takeshi", "Aiko", "Kenji", "Naoko", "Hiroshi"],
        ["Takahashi", "Suzuki", "Tanaka", "Watanabe", "Yamamoto", "Nakamura", "Kobayashi", "Ishikawa"],
        "western",
    ),
    (0.01, ["優希", "健二", "直子", "博"], ["高橋", "鈴木", "田中", "渡辺"], "eastern"),
    (
        0.04,
        ["Min-jun", "Seo-yeon", "Ji-ho", "Ha-eun", "Dong-hyun", "Soo-jin"],
        ["Kim", "Lee", "Park", "Choi", "Jung", "Kang", "Yoon"],
        "western",
    ),
    (0.01, ["민준", "서연", "지호", "하은"], ["김", "이", "박", "최"], "eastern"),
    (
        0.05,
        ["Ivan", "Olga", "Dmitry", "Natalia", "Sergey", "Anastasia", "Alexei", "Yulia"],
        ["Petrov", "Ivanova", "Smirnov", "Kuznetsova", "Volkov", "Sokolova", "Popov", "Lebedev"],
        "western",
    ),
    (0.02, ["Иван", "Ольга", "Дмитрий", "Наталья", "Сергей"], ["Петров", "Иванова", "Смирнов", "Кузнецова"], "western"),
    (
        0.07,
        ["Priya", "Rahul", "Ananya", "Vikram", "Lakshmi", "Arjun", "Deepika", "Sanjay"],
        ["Raghavan", "Sharma", "Iyer", "Chatterjee", "Reddy", "Banerjee", "Krishnan", "Gupta"],
        "western",
    ),
    (0.02, ["Nguyễn Văn", "Trần Thị", "Lê Minh", "Phạm Quốc"], ["An", "Hương", "Đức", "Bảo"], "vietnamese"),
    (
        0.02,
        ["Giorgos", "Eleni", "Nikos", "Katerina"],
        ["Papadopoulos", "Georgiou", "Nikolaidis", "Oikonomou"],
        "western",
    ),
    (
        0.03,
        ["Ahmed", "Fatima", "Omar", "Layla", "Youssef", "Amira"],
        ["Al-Farsi", "El-Sayed", "Haddad", "Mansour", "Nasser", "Khalil"],
        "western",
    ),
    (0.01, ["Chukwuemeka", "Adaeze", "Oluwaseun", "Ngozi"], ["Okafor", "Adeyemi", "Nwosu", "Balogun"], "western"),
]
_CULTURE_CUMULATIVE = list(itertools.accumulate(c[0] for c in _CULTURES))
_SUFFIXES = ["Jr.", "III", "II", "Sr."]
_MIDDLE = "ABCDEFGHJKLMNPRSTW"


def person_name(rng: random.Random) -> str:
    """A real-looking name: diacritics, romanized and native scripts, the odd middle initial or suffix."""
    _, given, family, order = rng.choices(_CULTURES, cum_weights=_CULTURE_CUMULATIVE)[0]
    g, f = rng.choice(given), rng.choice(family)
    if order == "eastern":
        return f + g
    if order == "vietnamese":
        return f"{g} {f}"
    name = f"{g} {rng.choice(_MIDDLE)}. {f}" if rng.random() < 0.12 else f"{g} {f}"
    if given is _CULTURES[0][1] and rng.random() < 0.15:
        name += " " + rng.choice(_SUFFIXES)
    return name


def initialled(name: str) -> str:
    """`Jana Müller` -> `J. Müller`, the way many papers list authors; names without spaces stay."""
    parts = name.split(" ")
    if len(parts) < 2 or parts[-1] in _SUFFIXES:
        return name
    return " ".join([p if p.endswith(".") else p[0] + "." for p in parts[:-1]] + parts[-1:])


COLLABORATIONS = [
    "ATLAS Collaboration",
    "CMS Collaboration",
    "LHCb Collaboration",
    "ALICE Collaboration",
    "LIGO Scientific Collaboration",
    "Virgo Collaboration",
    "Fermi-LAT Collaboration",
    "IceCube Collaboration",
    "Planck Collaboration",
    "Belle II Collaboration",
    "The DES Collaboration",
    "Event Horizon Telescope Collaboration",
]

# ----------------------------------------------------------------------------------------- institutions

REAL_INSTITUTIONS: list[tuple[str, str, str, Sequence[str]]] = [
    ("Université de Montréal", "CA", "education", ["UdeM"]),
    ("Universität Wien", "AT", "education", ["University of Vienna"]),
    ("Universidad de Buenos Aires", "AR", "education", ["UBA"]),
    ("Università di Bologna", "IT", "education", ["UNIBO"]),
    ("École Normale Supérieure", "FR", "education", ["ENS"]),
    ("Technische Universität München", "DE", "education", ["TUM"]),
    ("Københavns Universitet", "DK", "education", ["University of Copenhagen"]),
    ("Peking University", "CN", "education", ["北京大学"]),
    ("Tsinghua University", "CN", "education", ["清华大学"]),
    ("The University of Tokyo", "JP", "education", ["東京大学"]),
    ("Seoul National University", "KR", "education", ["서울대학교"]),
    ("Lomonosov Moscow State University", "RU", "education", ["МГУ"]),
    ("Indian Institute of Science", "IN", "education", ["IISc"]),
    ("Universidade de São Paulo", "BR", "education", ["USP"]),
    ("CERN", "CH", "facility", ["European Organization for Nuclear Research"]),
    ("Max-Planck-Institut für Astrophysik", "DE", "facility", ["MPA"]),
    ("Fermi National Accelerator Laboratory", "US", "facility", ["Fermilab"]),
    ("Instituto de Física Teórica UAM-CSIC", "ES", "facility", ["IFT"]),
]
CITIES: list[tuple[str, str, str]] = [
    ("Cambridge", "GB", "en"),
    ("Oxford", "GB", "en"),
    ("Edinburgh", "GB", "en"),
    ("Manchester", "GB", "en"),
    ("Boston", "US", "en"),
    ("Chicago", "US", "en"),
    ("Stanford", "US", "en"),
    ("Princeton", "US", "en"),
    ("Seattle", "US", "en"),
    ("Austin", "US", "en"),
    ("Michigan", "US", "en"),
    ("Maryland", "US", "en"),
    ("Toronto", "CA", "en"),
    ("Waterloo", "CA", "en"),
    ("Sydney", "AU", "en"),
    ("Melbourne", "AU", "en"),
    ("Auckland", "NZ", "en"),
    ("Cape Town", "ZA", "en"),
    ("Dublin", "IE", "en"),
    ("Singapore", "SG", "en"),
    ("Montréal", "CA", "fr"),
    ("Paris", "FR", "fr"),
    ("Lyon", "FR", "fr"),
    ("Grenoble", "FR", "fr"),
    ("Marseille", "FR", "fr"),
    ("Genève", "CH", "fr"),
    ("Lausanne", "CH", "fr"),
    ("Québec", "CA", "fr"),
    ("Berlin", "DE", "de"),
    ("München", "DE", "de"),
    ("Göttingen", "DE", "de"),
    ("Heidelberg", "DE", "de"),
    ("Köln", "DE", "de"),
    ("Zürich", "CH", "de"),
    ("Wien", "AT", "de"),
    ("Tübingen", "DE", "de"),
    ("Madrid", "ES", "es"),
    ("Barcelona", "ES", "es"),
    ("Valencia", "ES", "es"),
    ("Granada", "ES", "es"),
    ("Córdoba", "AR", "es"),
    ("Santiago", "CL", "es"),
    ("México", "MX", "es"),
    ("Bogotá", "CO", "es"),
    ("Roma", "IT", "it"),
    ("Milano", "IT", "it"),
    ("Padova", "IT", "it"),
    ("Pisa", "IT", "it"),
    ("Torino", "IT", "it"),
    ("Napoli", "IT", "it"),
    ("Lisboa", "PT", "pt"),
    ("Porto", "PT", "pt"),
    ("Rio de Janeiro", "BR", "pt"),
    ("Campinas", "BR", "pt"),
    ("Amsterdam", "NL", "nl"),
    ("Leiden", "NL", "nl"),
    ("Utrecht", "NL", "nl"),
    ("Delft", "NL", "nl"),
    ("Beijing", "CN", "zh"),
    ("Shanghai", "CN", "zh"),
    ("Nanjing", "CN", "zh"),
    ("Wuhan", "CN", "zh"),
    ("Hefei", "CN", "zh"),
    ("Hong Kong", "HK", "en"),
    ("Taipei", "TW", "zh"),
    ("Kyoto", "JP", "ja"),
    ("Osaka", "JP", "ja"),
    ("Tohoku", "JP", "ja"),
    ("Nagoya", "JP", "ja"),
    ("Seoul", "KR", "ko"),
    ("Daejeon", "KR", "ko"),
    ("Pohang", "KR", "ko"),
    ("Moscow", "RU", "ru"),
    ("Novosibirsk", "RU", "ru"),
    ("Saint Petersburg", "RU", "ru"),
    ("Kyiv", "UA", "ru"),
    ("Bangalore", "IN", "en"),
    ("Mumbai", "IN", "en"),
    ("Chennai", "IN", "en"),
    ("Kanpur", "IN", "en"),
    ("Warszawa", "PL", "pl"),
    ("Kraków", "PL", "pl"),
    ("Praha", "CZ", "cs"),
    ("Brno", "CZ", "cs"),
    ("Stockholm", "SE", "sv"),
    ("Uppsala", "SE", "sv"),
    ("Lund", "SE", "sv"),
    ("Oslo", "NO", "sv"),
    ("Helsinki", "FI", "en"),
    ("Aarhus", "DK", "sv"),
    ("Tel Aviv", "IL", "en"),
    ("Haifa", "IL", "en"),
    ("İstanbul", "TR", "tr"),
    ("Ankara", "TR", "tr"),
    ("Athína", "GR", "en"),
    ("Budapest", "HU", "en"),
    ("Tehran", "IR", "en"),
    ("Cairo", "EG", "en"),
    ("Lagos", "NG", "en"),
    ("Nairobi", "KE", "en"),
]
INSTITUTION_PATTERNS: dict[str, list[tuple[str, str]]] = {
    "en": [
        ("University of {city}", "education"),
        ("{city} Institute of Technology", "education"),
        ("{city} State University", "education"),
        ("{city} University", "education"),
        ("{city} Medical Center", "healthcare"),
        ("{city} Institute for Advanced Study", "nonprofit"),
    ],
    "fr": [
        ("Université de {city}", "education"),
        ("École Polytechnique de {city}", "education"),
        ("Institut de Physique Théorique de {city}", "facility"),
        ("Centre de Recherche de {city}", "facility"),
    ],
    "de": [
        ("Universität {city}", "education"),
        ("Technische Universität {city}", "education"),
        ("Max-Planck-Institut für Physik, {city}", "facility"),
        ("Hochschule {city}", "education"),
    ],
    "es": [
        ("Universidad de {city}", "education"),
        ("Universidad Nacional de {city}", "education"),
        ("Instituto de Física de {city}", "facility"),
    ],
    "it": [
        ("Università di {city}", "education"),
        ("Politecnico di {city}", "education"),
        ("INFN Sezione di {city}", "facility"),
    ],
    "pt": [("Universidade de {city}", "education"), ("Universidade Federal de {city}", "education")],
    "nl": [("Universiteit {city}", "education"), ("Technische Universiteit {city}", "education")],
    "zh": [
        ("{city} University", "education"),
        ("{city} Institute of Physics", "facility"),
        ("{city} University of Science and Technology", "education"),
    ],
    "ja": [("{city} University", "education"), ("University of {city}", "education")],
    "ko": [("{city} National University", "education"), ("{city} Institute of Science and Technology", "education")],
    "ru": [("{city} State University", "education"), ("{city} Institute of Nuclear Physics", "facility")],
    "pl": [("Uniwersytet w {city}", "education"), ("Politechnika w {city}", "education")],
    "cs": [("Univerzita v {city}", "education"), ("České vysoké učení technické, {city}", "education")],
    "sv": [("{city} universitet", "education"), ("Kungliga Tekniska högskolan, {city}", "education")],
    "tr": [("{city} Üniversitesi", "education"), ("{city} Teknik Üniversitesi", "education")],
    "any": [
        ("{city} Observatory", "facility"),
        ("{city} National Laboratory", "government"),
        ("{city} Research Institute", "nonprofit"),
        ("{city} Quantum Technologies Ltd", "company"),
        ("{city} Data Archive", "archive"),
    ],
}


def acronym(name: str) -> str:
    letters = [w[0] for w in name.replace(",", "").split() if w[0].isupper()]
    return "".join(letters) or name[:4].upper()


# ------------------------------------------------------------------------------------------- categories

CATEGORIES: list[tuple[str, float]] = [
    ("cs.LG", 9),
    ("cs.AI", 3),
    ("cs.CL", 4),
    ("cs.CV", 6),
    ("cs.DC", 2),
    ("cs.DS", 1.5),
    ("cs.CR", 1.5),
    ("cs.NI", 1),
    ("stat.ML", 2),
    ("math.AG", 2),
    ("math.NT", 1.5),
    ("math.PR", 2),
    ("math.CO", 2),
    ("math.AP", 2),
    ("math-ph", 1.5),
    ("hep-th", 5),
    ("hep-ph", 5),
    ("hep-ex", 2),
    ("hep-lat", 1),
    ("gr-qc", 2.5),
    ("astro-ph.GA", 3),
    ("astro-ph.CO", 3),
    ("astro-ph.HE", 2),
    ("astro-ph.SR", 2),
    ("cond-mat.str-el", 2.5),
    ("cond-mat.mes-hall", 3),
    ("cond-mat.stat-mech", 2),
    ("cond-mat.mtrl-sci", 3),
    ("quant-ph", 6),
    ("nucl-th", 1.5),
    ("physics.optics", 1.5),
    ("q-bio.NC", 1),
    ("q-bio.PE", 0.7),
    ("q-bio.QM", 0.7),
    ("econ.EM", 0.5),
    ("eess.SP", 1),
    ("q-fin.ST", 0.4),
]
CATEGORY_SINCE = {
    "cs.LG": 1998,
    "cs.AI": 1998,
    "cs.CL": 1998,
    "cs.CV": 1998,
    "cs.DC": 1998,
    "cs.DS": 1998,
    "cs.CR": 1998,
    "cs.NI": 1998,
    "stat.ML": 2007,
    "q-bio.NC": 2003,
    "q-bio.PE": 2003,
    "q-bio.QM": 2003,
    "econ.EM": 2017,
    "eess.SP": 2017,
    "q-fin.ST": 2008,
    "physics.optics": 1996,
}
CROSS_LISTS: dict[str, tuple[str, ...]] = {
    "cs.LG": ("stat.ML", "cs.AI", "cs.CV"),
    "cs.AI": ("cs.LG",),
    "cs.CL": ("cs.LG", "cs.AI"),
    "cs.CV": ("cs.LG",),
    "cs.DC": ("cs.LG", "cs.NI", "cs.PF"),
    "stat.ML": ("cs.LG", "math.ST"),
    "hep-th": ("gr-qc", "math-ph", "hep-ph"),
    "hep-ph": ("hep-ex", "hep-lat", "astro-ph.CO"),
    "hep-ex": ("hep-ph",),
    "gr-qc": ("hep-th", "astro-ph.CO"),
    "astro-ph.GA": ("astro-ph.CO",),
    "astro-ph.CO": ("gr-qc", "hep-ph"),
    "astro-ph.HE": ("hep-ph", "gr-qc"),
    "math.AG": ("math.NT", "hep-th"),
    "math.PR": ("math-ph", "cond-mat.stat-mech"),
    "cond-mat.str-el": ("cond-mat.supr-con", "quant-ph"),
    "cond-mat.mes-hall": ("cond-mat.mtrl-sci", "quant-ph"),
    "quant-ph": ("cond-mat.mes-hall", "cs.ET"),
    "q-bio.NC": ("cs.NE", "physics.bio-ph"),
    "eess.SP": ("cs.IT", "cs.LG"),
    "econ.EM": ("stat.ME",),
}
_FIELDS = {
    "cs.LG": "ml",
    "cs.AI": "ml",
    "cs.CL": "ml",
    "cs.CV": "ml",
    "stat.ML": "ml",
    "econ.EM": "ml",
    "q-fin.ST": "ml",
    "cs.DC": "systems",
    "cs.DS": "systems",
    "cs.CR": "systems",
    "cs.NI": "systems",
    "eess.SP": "systems",
    "hep-th": "hep",
    "hep-ph": "hep",
    "hep-ex": "hep",
    "hep-lat": "hep",
    "gr-qc": "hep",
    "nucl-th": "hep",
    "math-ph": "math",
    "quant-ph": "quant",
    "physics.optics": "quant",
    "astro-ph": "astro",
}


def field_of(category: str) -> str:
    if category in _FIELDS:
        return _FIELDS[category]
    head = category.split(".")[0]
    return {"math": "math", "astro-ph": "astro", "cond-mat": "condmat", "q-bio": "bio"}.get(head, "ml")


@functools.cache
def archive_share(archive: str, year: int) -> float:
    """The share of a year's papers whose primary category is in `archive` (`cs`, `hep-th`, ...)."""
    live = [(c, w) for c, w in CATEGORIES if CATEGORY_SINCE.get(c, 1995) <= year]
    return sum(w for c, w in live if c.split(".")[0] == archive) / sum(w for _, w in live)


_CATEGORY_KEYS = [k for k, _ in CATEGORIES]
_CATEGORY_CUMULATIVE = list(itertools.accumulate(w for _, w in CATEGORIES))


def category(rng: random.Random) -> str:
    """A primary category, drawn by its share of arXiv."""
    return rng.choices(_CATEGORY_KEYS, cum_weights=_CATEGORY_CUMULATIVE)[0]


# --------------------------------------------------------------------------------------------- text

_BANK: dict[str, dict[str, list[str]]] = {
    "ml": {
        "object": [
            "deep neural networks",
            "transformers",
            "graph neural networks",
            "diffusion models",
            "large language models",
            "reinforcement learning agents",
            "variational autoencoders",
            "contrastive representations",
            "federated learning",
            "kernel methods",
        ],
        "method": [
            "stochastic gradient descent",
            "attention pooling",
            "low-rank adaptation",
            "self-supervision",
            "Bayesian optimization",
            "knowledge distillation",
            "curriculum learning",
            "mixture of experts",
        ],
        "task": [
            "image classification",
            "machine translation",
            "few-shot learning",
            "out-of-distribution detection",
            "question answering",
            "time-series forecasting",
            "semantic segmentation",
            "code generation",
        ],
        "tex": [r"$O(1/\sqrt{T})$", r"$\ell_2$", r"$\epsilon$-greedy", r"$k$-NN", r"$\mathcal{L}_{\mathrm{KL}}$"],
    },
    "systems": {
        "object": [
            "asynchronous SGD",
            "distributed key-value stores",
            "consensus protocols",
            "GPU clusters",
            "serverless functions",
            "content delivery networks",
            "Byzantine fault tolerance",
            "parameter servers",
            "stream processing engines",
            "succinct data structures",
        ],
        "method": [
            "work stealing",
            "speculative execution",
            "erasure coding",
            "lock-free queues",
            "RDMA",
            "differential privacy",
            "zero-knowledge proofs",
            "adaptive batching",
        ],
        "task": [
            "throughput prediction",
            "tail-latency reduction",
            "load balancing",
            "scheduling in TensorFlow",
            "intrusion detection",
            "straggler mitigation",
            "cache eviction",
            "shortest paths",
        ],
        "tex": [r"$O(n \log n)$", r"$p99$", r"$\Theta(\log^2 n)$", r"$f < n/3$"],
    },
    "math": {
        "object": [
            "moduli spaces of curves",
            "elliptic curves",
            "random matrices",
            "Calabi-Yau threefolds",
            "Hecke operators",
            "Gromov-Witten invariants",
            "random walks on groups",
            "Sobolev spaces",
            "toric varieties",
            "Hurwitz numbers",
        ],
        "method": [
            "the circle method",
            "derived categories",
            "Stein's method",
            "microlocal analysis",
            "tropical geometry",
            "the probabilistic method",
            "spectral sequences",
            "concentration inequalities",
        ],
        "task": [
            "rationality questions",
            "the Riemann hypothesis over function fields",
            "mixing times",
            "well-posedness",
            "the minimal model program",
            "Ramsey numbers",
            "local-global principles",
        ],
        "tex": [r"$\mathbb{P}^n$", r"$\mathrm{SL}_2(\mathbb{Z})$", r"$L^p$", r"$\zeta(s)$", r"$\overline{M}_{g,n}$"],
    },
    "hep": {
        "object": [
            "scattering amplitudes",
            "black hole entropy",
            "the AdS/CFT correspondence",
            "axion dark matter",
            "the Higgs boson",
            "lattice QCD",
            "supersymmetric gauge theories",
            "gravitational waves",
            "neutrino oscillations",
            "conformal bootstrap",
        ],
        "method": [
            "holographic renormalization",
            "effective field theory",
            "the worldsheet formalism",
            "Monte Carlo simulation",
            "localization",
            "the on-shell method",
            "perturbative unitarity",
        ],
        "task": [
            "precision measurements at the LHC",
            "the hierarchy problem",
            "the information paradox",
            "flavour anomalies",
            "inflationary cosmology",
            "confinement",
        ],
        "tex": [r"$\mathcal{N}=4$", r"$\sqrt{s}=13$ TeV", r"$\alpha_s$", r"$AdS_5 \times S^5$", r"$g_{\mu\nu}$"],
    },
    "astro": {
        "object": [
            "galaxy clusters",
            "active galactic nuclei",
            "exoplanet atmospheres",
            "fast radio bursts",
            "the cosmic microwave background",
            "dwarf galaxies",
            "Type Ia supernovae",
            "stellar streams",
        ],
        "method": [
            "weak lensing",
            "N-body simulations",
            "spectroscopic surveys",
            "radiative transfer",
            "Bayesian hierarchical modelling",
            "photometric redshifts",
        ],
        "task": [
            "the Hubble tension",
            "galaxy formation",
            "star formation histories",
            "dark energy constraints",
            "the missing baryon problem",
            "stellar feedback",
        ],
        "tex": [r"$z \sim 2$", r"$H_0$", r"$M_\odot$", r"$\Lambda$CDM", r"$\sigma_8$"],
    },
    "condmat": {
        "object": [
            "topological insulators",
            "Hubbard models",
            "spin liquids",
            "twisted bilayer graphene",
            "high-temperature superconductors",
            "quantum Hall states",
            "Weyl semimetals",
            "glasses",
        ],
        "method": [
            "density functional theory",
            "DMRG",
            "quantum Monte Carlo",
            "dynamical mean-field theory",
            "angle-resolved photoemission",
            "the renormalization group",
        ],
        "task": [
            "phase diagrams",
            "transport anomalies",
            "many-body localization",
            "critical exponents",
            "pairing symmetry",
            "magnetic frustration",
        ],
        "tex": [r"$T_c$", r"$J_1$-$J_2$", r"$\nu = 5/2$", r"$U/t$", r"$\mathbb{Z}_2$"],
    },
    "quant": {
        "object": [
            "superconducting qubits",
            "quantum error-correcting codes",
            "entangled photons",
            "variational quantum eigensolvers",
            "trapped ions",
            "quantum walks",
            "Bell inequalities",
        ],
        "method": [
            "randomized benchmarking",
            "tensor networks",
            "quantum tomography",
            "dynamical decoupling",
            "surface codes",
            "adiabatic state preparation",
        ],
        "task": [
            "fault-tolerant computation",
            "quantum advantage",
            "quantum key distribution",
            "Hamiltonian simulation",
            "decoherence suppression",
        ],
        "tex": [r"$|\psi\rangle$", r"$T_2^*$", r"$[[n,k,d]]$", r"$\rho \otimes \sigma$", r"$\hbar$"],
    },
    "bio": {
        "object": [
            "cortical circuits",
            "gene regulatory networks",
            "epidemic models",
            "protein folding",
            "population dynamics",
            "spiking neurons",
            "microbial communities",
        ],
        "method": [
            "stochastic simulation",
            "single-cell sequencing",
            "agent-based modelling",
            "information-theoretic analysis",
            "phylogenetic inference",
        ],
        "task": [
            "memory consolidation",
            "the spread of infections",
            "evolutionary stability",
            "cell fate decisions",
            "drug resistance",
        ],
        "tex": [r"$R_0$", r"$\tau_m$", r"$N_e$", r"$\Delta G$"],
    },
}
_ADJ = [
    "Scalable",
    "Robust",
    "Efficient",
    "Provable",
    "Adaptive",
    "Nonlinear",
    "Sparse",
    "Exact",
    "Universal",
    "Hierarchical",
    "Stochastic",
    "Emergent",
    "Minimal",
    "Anomalous",
    "Precise",
]
_TITLE_TEMPLATES = [
    "{Adj} {method} for {task}",
    "On {object} and {task}",
    "{Object} via {method}",
    "Towards {adj} {task} with {object}",
    "A note on {object}",
    "{Object}: {adj} {method} and {task}",
    "Revisiting {object} with {method}",
    "Throughput prediction of {object} in {task}",
    "{Object} beyond {tex}",
]
_SENTENCES = [
    "We study {object} in the context of {task}.",
    "We propose a {adj} approach based on {method} that scales to realistic settings.",
    "Our analysis shows that the error scales as {tex} under mild assumptions.",
    "Building on {method}, we derive {adj} bounds for {object}.",
    "Experiments on {task} show consistent gains over strong baselines.",
    "The role of {object} in {task} has remained poorly understood.",
    "We find that {object} exhibit {adj} behaviour governed by {tex}.",
    "Our results suggest new directions for {task} and {object}.",
    "In particular, we identify a regime where {method} fails and explain why.",
    "Code and data are publicly available.",
]


def _pick(rng: random.Random, items: Sequence[str]) -> str:
    # Cheaper than rng.choice, and the generator draws millions of these.
    return items[int(rng.random() * len(items))]


def _fill(rng: random.Random, template: str, field: str) -> str:
    bank = _BANK[field]
    obj, adj = _pick(rng, bank["object"]), _pick(rng, _ADJ)
    return template.format(
        object=obj,
        Object=obj[0].upper() + obj[1:],
        method=_pick(rng, bank["method"]),
        task=_pick(rng, bank["task"]),
        tex=_pick(rng, bank["tex"]),
        adj=adj.lower(),
        Adj=adj,
    )


def title(rng: random.Random, field: str) -> str:
    return _fill(rng, rng.choice(_TITLE_TEMPLATES), field)


def short_title(rng: random.Random) -> str:
    return title(rng, rng.choice(list(_BANK)))


def abstract(rng: random.Random, field: str) -> str:
    picks = rng.sample(_SENTENCES, rng.randint(4, 7))
    return " ".join(_fill(rng, s, field) for s in picks)


def summary(rng: random.Random, field: str, paper_title: str) -> str:
    return f"The paper addresses {paper_title[0].lower() + paper_title[1:]}. " + _fill(
        rng, rng.choice(_SENTENCES), field
    )


def topics(rng: random.Random, field: str) -> list[str]:
    bank = _BANK[field]
    return sorted(set(rng.sample(bank["object"], 2) + rng.sample(bank["method"], 1)))


# Kinds from db.records.PAPER_TYPES; six of them, as many as before, so the generator draws the same numbers.
PAPER_TYPES = ["THEORY", "EMPIRICAL", "METHOD", "SURVEY", "POSITION", "DATASET"]
NOVELTY = [
    "An incremental improvement on established methods.",
    "A substantial advance over earlier approaches.",
    "A new direction that departs from earlier work.",
]
RESEARCH_FIELDS = {
    "ml": "Machine Learning",
    "systems": "Computer Systems",
    "math": "Mathematics",
    "hep": "High Energy Physics",
    "astro": "Astrophysics",
    "condmat": "Condensed Matter",
    "quant": "Quantum Physics",
    "bio": "Quantitative Biology",
}
LICENSES = [
    "http://arxiv.org/licenses/nonexclusive-distrib/1.0/",
    "http://creativecommons.org/licenses/by/4.0/",
    "http://creativecommons.org/licenses/by-nc-sa/4.0/",
    "http://creativecommons.org/publicdomain/zero/1.0/",
]
_JOURNALS = {
    "ml": ["JMLR", "Trans. Mach. Learn. Res."],
    "systems": ["Proc. VLDB Endow.", "IEEE Trans. Parallel Distrib. Syst."],
    "math": ["Ann. of Math.", "Invent. Math.", "Duke Math. J."],
    "hep": ["Phys. Rev. D", "JHEP", "Nucl. Phys. B"],
    "astro": ["Astrophys. J.", "Mon. Not. R. Astron. Soc.", "Astron. Astrophys."],
    "condmat": ["Phys. Rev. B", "Phys. Rev. Lett."],
    "quant": ["Phys. Rev. A", "Quantum", "PRX Quantum"],
    "bio": ["PLoS Comput. Biol.", "J. Theor. Biol."],
}


def journal_ref(rng: random.Random, field: str, year: int) -> str:
    return f"{rng.choice(_JOURNALS[field])} {rng.randint(1, 120)} ({year + rng.randint(0, 1)}) {rng.randint(1, 9999)}"


_DOI_PREFIXES = ["j", "s", "PhysRevD", "jhep", "mnras", "acs"]


def doi_suffix(rng: random.Random) -> str:
    r = rng.random()
    return f"{_DOI_PREFIXES[int(r * 6)]}.{100_000 + int(r * 1e12) % 9_900_000}"
