"""`kerasbert-classify`: `kerasbert-predict` under the name it had when it served classifiers
only; the same flags, input and output (`kerasbert.cli.predict`).

    kerasbert-classify --export_dir=exports/gloss --input_file=sentences.txt
"""

from kerasbert.cli import predict
from kerasbert.cli.one_line_errors import run_reporting_errors


def main(argv):
    predict.main(argv)


def run():
    run_reporting_errors(main, "kerasbert-classify", expected=predict.EXPECTED_ERRORS)


if __name__ == "__main__":
    run()
