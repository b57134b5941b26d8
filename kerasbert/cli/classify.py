"""`kerasbert-classify`: `kerasbert-predict` under the name it had when it served classifiers
only; the same flags, input and output (`kerasbert.cli.predict`).

    kerasbert-classify --export_dir=exports/gloss --input_file=sentences.txt
"""

from kerasbert.cli.predict import run_as


def run():
    run_as("kerasbert-classify")


if __name__ == "__main__":
    run()
