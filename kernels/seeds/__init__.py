"""The designs of the articles this project reproduces, implemented here from their descriptions.

Each module holds the seed's kernel(s) as the article describes them, so that the studies can
measure the design next to ours and next to the peers; nothing here is tuned.

    softmax    seed_rowwise (one program per row, whole row in one block) and seed_multipass
               (separate max / exp / sum / divide launches over a zero-initialised output)
"""
