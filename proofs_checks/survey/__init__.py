"""`tverify survey`: the own-model checks over a catalogue of real attention implementations (issue 27)."""
