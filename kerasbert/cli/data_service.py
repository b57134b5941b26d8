"""`kerasbert-data-service`: run a tf.data service dispatcher or worker until SIGTERM / SIGINT.

    kerasbert-data-service --mode=dispatcher --port=5050 --work_dir=/shared/data_service
    kerasbert-data-service --mode=worker --dispatcher=dispatcher-host:5050 --port=5051

The dispatcher runs in fault-tolerant mode: it journals its state in `--work_dir`,
and restarted on the same `--work_dir` it picks up its jobs and workers. Workers
run the input pipelines of `kerasbert-pretrain --tf_data_service=grpc://HOST:5050`
(and `kerasbert-finetune`); start as many as the trainer needs, on any hosts, at
any time. Each prints one line once it serves.
"""

from absl import flags

from kerasbert.cli.flag_bounds import require_positive
from kerasbert.cli.one_line_errors import run_reporting_errors

FLAGS = flags.FLAGS
flags.DEFINE_enum("mode", None, ["dispatcher", "worker"], "What to run.", required=True)
flags.DEFINE_integer("port", 0, "Port to serve on, on every network interface, with no "
                     "authentication: trusted networks only (docs/scaling_out.md, Security). 0: "
                     "any free port; the line printed at start names it.", lower_bound=0,
                     upper_bound=65535)
flags.DEFINE_string("work_dir", None, "Dispatcher: folder of its journal (fault-tolerant mode).")
flags.DEFINE_string("dispatcher", None, "Worker: the dispatcher's HOST:PORT.")
flags.DEFINE_string("worker_address", None, "Worker: the HOST:PORT it tells the dispatcher, "
                    "which hands it to trainers to reach it by ('%port%' stands for its port). "
                    "It does not choose what the worker listens on: that is every interface, at "
                    "--port. Default: localhost:%port%, which only trainers on this host can "
                    "use: on a cluster give a name they can resolve.")
flags.DEFINE_float("dispatcher_timeout", 60.0, "Worker: seconds to wait for the dispatcher.")
require_positive("dispatcher_timeout")


def main(argv):
    if len(argv) > 1:
        raise ValueError(f"unexpected arguments: {argv[1:]}")
    from kerasbert.data.service import serve

    serve(FLAGS.mode, FLAGS.port, FLAGS.work_dir, FLAGS.dispatcher, FLAGS.worker_address,
          FLAGS.dispatcher_timeout)


def run():
    run_reporting_errors(main, "kerasbert-data-service")


if __name__ == "__main__":
    run()
