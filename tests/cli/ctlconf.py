"""What the tests/cli cases share: an offline configuration (a broker that
is never reached, a data_dir that does not exist) in a temporary
directory."""
import json
import os


def offline_config(tmpdir):
    """Writes TMPDIR/config.json (one input topic, orders; data_dir
    TMPDIR/none) and returns its path."""
    path = os.path.join(tmpdir, "config.json")
    with open(path, "w") as f:
        json.dump({"data_dir": os.path.join(tmpdir, "none"),
                   "kafka": {"bootstrap.servers": "127.0.0.1:1",
                             "group.id": "g"},
                   "topics": {"orders": {"output_topic": "o",
                                         "dlq_topic": "d"}}}, f)
    return path
