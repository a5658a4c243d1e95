"""A Spark standalone cluster on loopback (a master and N one-core workers) and a session on
it, for the interop tests (tests/interop/conftest.py) and `neve bench iceberg`."""
import contextlib
import os
import pathlib
import socket
import subprocess
import time

from ports import free_port


@contextlib.contextmanager
def cluster(jar, logs, python, workers=2, worker_memory="1g", executor_memory="768m"):
    """Yield a SparkSession on a fresh cluster with `jar` (Iceberg's runtime); stop it all."""
    import pyspark
    from pyspark.sql import SparkSession

    logs = pathlib.Path(logs)
    logs.mkdir(parents=True, exist_ok=True)
    home = pathlib.Path(pyspark.__file__).parent
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
           "PYSPARK_PYTHON": python}
    spark_class = str(home / "bin" / "spark-class")
    port = free_port()
    procs = []

    def start(name, *args):
        log = open(logs / f"{name}.log", "w")
        procs.append(subprocess.Popen([spark_class, *args], env=env, stdout=log,
                                      stderr=subprocess.STDOUT))

    def logs_text():
        return "".join(p.read_text() for p in logs.glob("*.log"))

    # The driver starts Python workers too (Python data sources are planned there) with the
    # interpreter SparkContext reads from PYSPARK_PYTHON when it starts.
    os.environ["PYSPARK_PYTHON"] = python
    session = None
    try:
        start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
              "--port", str(port), "--webui-port", str(free_port()))
        deadline = time.time() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.time() > deadline:
                    raise RuntimeError("Spark master did not start: " + logs_text())
                time.sleep(0.5)
        for i in range(workers):
            start(f"worker-{i}", "org.apache.spark.deploy.worker.Worker",
                  f"spark://127.0.0.1:{port}", "--host", "127.0.0.1", "--cores", "1",
                  "--memory", worker_memory, "--webui-port", str(free_port()),
                  "--work-dir", str(logs / f"work-{i}"))
        session = (
            SparkSession.builder.master(f"spark://127.0.0.1:{port}")
            .appName("neve")
            .config("spark.jars", jar)
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.ui.enabled", "false")
            .config("spark.executor.memory", executor_memory)
            .config("spark.sql.session.timeZone", "UTC")
            .getOrCreate()
        )
        # Every worker's executor registered (the driver counts as one more).
        deadline = time.time() + 120
        while session.sparkContext._jsc.sc().getExecutorMemoryStatus().size() < workers + 1:
            if time.time() > deadline:
                raise RuntimeError("Spark executors did not register: " + logs_text())
            time.sleep(0.5)
        yield session
    finally:
        if session is not None:
            session.stop()
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
