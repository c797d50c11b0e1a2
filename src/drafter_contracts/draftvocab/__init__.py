"""The draft vocabulary of an EAGLE-3 drafter (``d2t`` / ``t2d``), checked against the rows it was built from.

A drafter predicts over the N most frequent supervised ids; a supervised token outside them is
never learnt. ``files`` finds and reads the mapping where producers put it, ``rule`` says which
selection this dataset's supervised counts produce, ``contracts`` registers the three contracts,
``report`` draws the coverage in report.html.
"""
