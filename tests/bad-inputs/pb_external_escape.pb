Bxj-
location!../fixtures/bad/short_weights.binj
offset0j
length16p