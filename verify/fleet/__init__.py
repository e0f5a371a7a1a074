"""verify fleet: many ranks under a launcher, their collectives and attestations, one report."""
