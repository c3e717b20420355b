"""Static checks of docker/: what can be verified about the image and the stack without Docker.

Each ``*_problems`` function returns a list of human-readable problems (empty when all is well),
so tests can assert on the real files and, with deliberately broken copies, that every check
can fail.
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from packaging.requirements import Requirement
from packaging.version import Version

AIRFLOW_COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
SPARK_MASTER_CLASS = "org.apache.spark.deploy.master.Master"
SPARK_WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
S3_IMAGES = ("minio/minio", "localstack/localstack", "quay.io/minio/minio")


@dataclass
class Dockerfile:
    """A Dockerfile as instructions, with ARG defaults and the packages its RUNs install."""

    instructions: list[tuple[str, str]]
    args: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> Dockerfile:
        # Docker drops comment lines, even inside a continued instruction, then joins lines.
        lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith("#")]
        joined = re.sub(r"\\\n", " ", "\n".join(lines))
        instructions = []
        for line in joined.splitlines():
            if line.strip():
                keyword, _, rest = line.strip().partition(" ")
                instructions.append((keyword.upper(), rest.strip()))
        args = {}
        for keyword, rest in instructions:
            if keyword == "ARG" and "=" in rest:
                name, _, default = rest.partition("=")
                args[name.strip()] = default.strip().strip('"')
        return cls(instructions, args)

    def expand(self, text: str) -> str:
        """``${NAME}`` and ``$NAME`` replaced by the ARG defaults."""
        return re.sub(
            r"\$\{(\w+)\}|\$(\w+)",
            lambda m: self.args.get(m.group(1) or m.group(2), m.group(0)),
            text,
        )

    def runs(self) -> list[str]:
        return [self.expand(rest) for keyword, rest in self.instructions if keyword == "RUN"]

    def apt_packages(self) -> set[str]:
        """Packages named by ``apt-get install`` in any RUN."""
        found: set[str] = set()
        for run in self.runs():
            for command in re.split(r"&&|;", run):
                words = command.split()
                if words[:2] == ["apt-get", "install"]:
                    found.update(w for w in words[2:] if not w.startswith("-"))
        return found

    def pip_installs(self) -> list[str]:
        """Arguments of every ``pip install`` (options and their values dropped, quotes
        removed)."""
        return [w for w, option in self._pip_words() if option is None]

    def pip_constraints(self) -> list[str]:
        """The constraints files of every ``pip install`` (``-c``)."""
        return [w for w, option in self._pip_words() if option in ("-c", "--constraint")]

    def _pip_words(self) -> list[tuple[str, str | None]]:
        found: list[tuple[str, str | None]] = []
        for run in self.runs():
            for command in run.split("&&"):
                words = shlex.split(command)
                for i in range(len(words) - 1):
                    if words[i].endswith("pip") and words[i + 1] == "install":
                        option = None
                        for word in words[i + 2 :]:
                            if word.startswith("-"):
                                option = word if word in ("-c", "--constraint", "-r") else None
                                continue
                            found.append((word, option))
                            option = None
        return found

    def copies(self) -> list[str]:
        return [rest for keyword, rest in self.instructions if keyword == "COPY"]

    def base_images(self) -> list[str]:
        return [
            self.expand(rest.split()[0]) for keyword, rest in self.instructions if keyword == "FROM"
        ]


def pyproject_requirements(pyproject: Path) -> dict[str, Requirement]:
    """The project's dependencies by normalised name."""
    data = tomllib.loads(pyproject.read_text())
    requirements = [Requirement(r) for r in data["project"]["dependencies"]]
    return {r.name.lower(): r for r in requirements}


def pinned_version(requirement: Requirement) -> str:
    """The exact version of an ``==X.Y.Z`` requirement."""
    pins = [s.version for s in requirement.specifier if s.operator == "=="]
    if len(pins) != 1 or "*" in pins[0]:
        raise ValueError(f"{requirement} is not pinned to one exact version")
    return pins[0]


def constraint_pins(path: Path) -> dict[str, str]:
    """The exact versions a constraints file pins, by lower-cased package name."""
    pins: dict[str, str] = {}
    for line in path.read_text().splitlines():
        name, sep, version = line.partition("==")
        if sep and not line.startswith("#"):
            pins[name.strip().lower()] = version.strip()
    return pins


def as_list(command: Any) -> list[str]:
    """A compose ``command`` (list or string) as words."""
    if command is None:
        return []
    return [str(w) for w in command] if isinstance(command, list) else shlex.split(str(command))


def depends_on(service: dict[str, Any]) -> list[str]:
    """Services a compose service depends on (list or mapping form)."""
    raw = service.get("depends_on") or []
    return list(raw) if isinstance(raw, dict | list) else [str(raw)]


def services_running(compose: dict[str, Any], *prefix: str) -> list[str]:
    """Names of the services whose command starts with ``prefix``."""
    return [
        name
        for name, service in compose["services"].items()
        if as_list(service.get("command"))[: len(prefix)] == list(prefix)
    ]


def required_service_problems(compose: dict[str, Any]) -> list[str]:
    """PostgreSQL, an S3 endpoint, the four Airflow components, a Spark master and worker."""
    services = compose.get("services") or {}
    problems = []
    images = {name: str(s.get("image", "")) for name, s in services.items()}
    if not any(image.startswith("postgres:") for image in images.values()):
        problems.append("no postgres:* service")
    if not any(image.startswith(S3_IMAGES) for image in images.values()):
        problems.append(f"no S3 endpoint service (one of {', '.join(S3_IMAGES)})")
    for component in AIRFLOW_COMPONENTS:
        if len(services_running(compose, "airflow", component)) != 1:
            problems.append(f"not exactly one service runs `airflow {component}`")
    for role, cls in (("master", SPARK_MASTER_CLASS), ("worker", SPARK_WORKER_CLASS)):
        if not services_running(compose, "spark-class", cls):
            problems.append(f"no Spark {role} service (spark-class {cls})")
    return problems


def dependency_problems(compose: dict[str, Any]) -> list[str]:
    """Every ``depends_on`` names another service of the file."""
    services = compose["services"]
    return [
        f"{name} depends on {other!r}, which is not a service"
        + (" (itself)" if other == name else "")
        for name, service in services.items()
        for other in depends_on(service)
        if other not in services or other == name
    ]


def volume_problems(compose: dict[str, Any]) -> list[str]:
    """Named volumes that services mount are declared at the top level."""
    declared = set(compose.get("volumes") or {})
    problems = []
    for name, service in compose["services"].items():
        for volume in service.get("volumes") or []:
            source = str(volume).split(":")[0]
            if not source.startswith((".", "/", "$", "~")) and source not in declared:
                problems.append(f"{name} mounts undeclared volume {source!r}")
    return problems


def _spark_master_urls(compose: dict[str, Any]) -> set[str]:
    urls = set()
    for name in services_running(compose, "spark-class", SPARK_MASTER_CLASS):
        words = as_list(compose["services"][name]["command"])
        port = words[words.index("--port") + 1] if "--port" in words else "7077"
        urls.add(f"spark://{name}:{port}")
    return urls


def spark_connection_problems(compose: dict[str, Any]) -> list[str]:
    """Each Airflow component defines a Spark connection whose master is the compose's master."""
    masters = _spark_master_urls(compose)
    problems = []
    for component in AIRFLOW_COMPONENTS:
        for name in services_running(compose, "airflow", component):
            env = compose["services"][name].get("environment") or {}
            connections = {k: v for k, v in env.items() if k.startswith("AIRFLOW_CONN_SPARK")}
            if not connections:
                problems.append(f"{name} defines no AIRFLOW_CONN_SPARK_* connection")
            for key, value in connections.items():
                conn = json.loads(value)
                master = str(conn.get("host", ""))
                if conn.get("port"):
                    master = f"{master}:{conn['port']}"
                if conn.get("conn_type") != "spark" or master not in masters:
                    problems.append(f"{name}: {key} points at {master!r}, not one of {masters}")
    return problems


def spark_version_problems(
    compose: dict[str, Any], dockerfile: Dockerfile, pyspark: str
) -> list[str]:
    """The Spark cluster runs the pinned pyspark's Spark: build args, image tag, Dockerfile ARG."""
    problems = []
    if dockerfile.args.get("SPARK_VERSION") != pyspark:
        problems.append(f"Dockerfile ARG SPARK_VERSION={dockerfile.args.get('SPARK_VERSION')}")
    for cls in (SPARK_MASTER_CLASS, SPARK_WORKER_CLASS):
        for name in services_running(compose, "spark-class", cls):
            service = compose["services"][name]
            image = str(service.get("image", ""))
            build_args = (service.get("build") or {}).get("args") or {}
            if str(build_args.get("SPARK_VERSION")) != pyspark:
                problems.append(f"{name} builds SPARK_VERSION={build_args.get('SPARK_VERSION')}")
            if not re.search(rf"(?<![\d.]){re.escape(pyspark)}(?![\d.])", image):
                problems.append(f"{name} image {image!r} does not name Spark {pyspark}")
    return problems


def airflow_version_problems(
    compose: dict[str, Any], dockerfile: Dockerfile, airflow: Requirement
) -> list[str]:
    """The image's Airflow satisfies pyproject's ``apache-airflow`` requirement everywhere."""
    problems = []
    version = dockerfile.args.get("AIRFLOW_VERSION", "")
    if not version or Version(version) not in airflow.specifier:
        problems.append(f"Dockerfile ARG AIRFLOW_VERSION={version!r} not in {airflow.specifier}")
    for name in sorted(
        {n for c in AIRFLOW_COMPONENTS for n in services_running(compose, "airflow", c)}
    ):
        service = compose["services"][name]
        built = str(((service.get("build") or {}).get("args") or {}).get("AIRFLOW_VERSION"))
        if built != version:
            problems.append(f"{name} builds AIRFLOW_VERSION={built}, Dockerfile has {version}")
    return problems


def dockerfile_install_problems(
    dockerfile: Dockerfile, requirements: dict[str, Requirement]
) -> list[str]:
    """Java 17, the project's wheel (so its pins), and no explicit pin that contradicts them."""
    problems = []
    if not {"openjdk-17-jre-headless", "openjdk-17-jdk-headless"} & dockerfile.apt_packages():
        problems.append("no openjdk-17 package installed with apt-get")
    installs = dockerfile.pip_installs()
    wheels = [w for w in installs if ".whl" in w]
    if not wheels:
        problems.append("the project itself is not pip-installed (its wheel)")
    if not any("pyproject.toml" in copy for copy in dockerfile.copies()):
        problems.append("pyproject.toml is not copied into the image")
    for word in installs:
        if word in wheels:
            continue
        requirement = Requirement(word)
        ours = requirements.get(requirement.name.lower())
        for spec in requirement.specifier:
            if spec.operator == "==" and ours and Version(spec.version) not in ours.specifier:
                problems.append(f"Dockerfile installs {word}, pyproject wants {ours}")
    return problems


def constraints_problems(dockerfile: Dockerfile, repo: Path) -> list[str]:
    """The image installs with the constraints file of its Spark line (``${line}`` is the
    major.minor of SPARK_VERSION), which pins the Spark and Airflow the image names."""
    spark = dockerfile.args.get("SPARK_VERSION", "")
    files = [c.replace("${line}", ".".join(spark.split(".")[:2])) for c in
             dockerfile.pip_constraints()]  # fmt: skip
    if len(files) != 1:
        return [f"one constraints file expected, found {files}"]
    relative = files[0].removeprefix("/tmp/cdc-ingest-src/")
    if not (repo / relative).is_file():
        return [f"{relative} does not exist"]
    pins = constraint_pins(repo / relative)
    problems = []
    for package, arg in (("pyspark", "SPARK_VERSION"), ("apache-airflow", "AIRFLOW_VERSION")):
        if pins.get(package) != dockerfile.args.get(arg):
            problems.append(
                f"{relative} pins {package} {pins.get(package)}, the Dockerfile builds "
                f"{dockerfile.args.get(arg)}"
            )
    return problems


def load_compose(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict) or not isinstance(data.get("services"), dict):
        raise ValueError(f"{path}: no services mapping")
    return data
