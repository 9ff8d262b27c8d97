//! Changes to the desired state, one at a time on the control thread: a
//! whole spec (`PUT /v1/spec`, a removal, a rollout step) or an addition
//! appended in place (`POST /v1/spec/additions`), each applied all or
//! nothing, persisted, and refused (409) when made from an old version.

use sluice_dataplane::{Applied, PlatformSettings, Runtime};
use sluice_spec::{IndexedSpec, Spec, SpecError};

use crate::candidate::Candidate;
use crate::control::State;
use crate::error::ApiError;

/// What a successful change did.
#[derive(Debug, Clone)]
pub struct Changed {
    /// The new version (the old one for a dry run or no change).
    pub version: u64,
    /// What changed and how long it took.
    pub applied: Applied,
}

impl State {
    /// Parses spec text; `source` names it in errors and is the base of
    /// its relative paths when it is a file path.
    pub fn parse(&self, text: &str, source: &str) -> Result<Spec, SpecError> {
        let types: Vec<&str> = self.registry.iter().map(|t| t.name).collect();
        sluice_spec::parse_str(text, source, &types)
    }

    /// Makes `spec` the desired state if the current version is `expect`
    /// (any version when `None`); with `dry_run`, only says what would
    /// change.
    pub fn change(
        &mut self,
        spec: impl Into<Candidate>,
        expect: Option<u64>,
        dry_run: bool,
    ) -> Result<Changed, ApiError> {
        self.change_journaled(spec, expect, dry_run, None)
    }

    /// [`State::change`] for a spec that is the desired state plus
    /// `added` (an addition's text and source): persisted by appending
    /// that to the journal rather than writing the whole spec.
    pub fn change_journaled(
        &mut self,
        candidate: impl Into<Candidate>,
        expect: Option<u64>,
        dry_run: bool,
        added: Option<(&str, &str)>,
    ) -> Result<Changed, ApiError> {
        self.check_version(expect)?;
        let candidate = candidate.into();
        let spec = candidate.spec();
        if dry_run {
            return self.dry_run_of(spec);
        }
        let applied = self.apply_spec(&candidate)?;
        let spec = candidate.into_desired();
        if applied.diff.is_empty() && self.desired.as_ref() == Some(&spec) {
            return Ok(Changed {
                version: self.version,
                applied,
            });
        }
        let journal = added.filter(|_| self.desired.is_some());
        Ok(self.made_desired(spec, journal, applied))
    }

    /// [`State::change_journaled`] for an addition appended to the desired
    /// state itself (`sluice_spec::add_to`: the caller took `desired` and
    /// `grown` holds it), so that nothing the platform holds is copied.
    /// Whatever is refused, or a dry run, puts the desired state back as
    /// it was.
    pub fn grow_journaled(
        &mut self,
        grown: sluice_spec::ValidSpec,
        expect: Option<u64>,
        dry_run: bool,
        added: (&str, &str),
    ) -> Result<Changed, ApiError> {
        let outcome = match self.check_version(expect) {
            Err(e) => Err(e),
            Ok(()) if dry_run => self.dry_run_of(&grown),
            Ok(()) => {
                let candidate = Candidate::Valid(grown);
                let journal = candidate.grown().then_some(added);
                // Its journal line is written now and syncs while it
                // applies (`syncer.rs`): the sync was a fifth of a
                // create's time after the apply.
                let ahead = journal.and_then(|a| self.journal_ahead(a));
                match self.apply_spec(&candidate) {
                    Ok(applied) => {
                        let spec = candidate.into_desired();
                        return Ok(match ahead {
                            Some(a) => self.made_desired_ahead(spec, a, applied),
                            None => self.made_desired(spec, journal, applied),
                        });
                    }
                    Err(e) => {
                        if let Some(a) = ahead {
                            self.revoke(a);
                        }
                        self.desired = candidate.into_base();
                        return Err(e);
                    }
                }
            }
        };
        self.desired = grown.into_base();
        outcome
    }

    /// What making `spec` desired would change, changing nothing.
    fn dry_run_of(&self, spec: &Spec) -> Result<Changed, ApiError> {
        // A platform with nothing running takes the spec's settings on
        // apply (see `apply_spec`): judge the spec on its own then.
        let diff = if self.is_empty() {
            self.rt.dry_run_from_empty(spec)?
        } else {
            self.rt.dry_run(spec)?
        };
        Ok(Changed {
            version: self.version,
            applied: Applied {
                diff,
                ..Applied::default()
            },
        })
    }

    /// `spec`, applied, becomes the desired state at the next version,
    /// persisted (`journal`: as that addition to the one before).
    fn made_desired(
        &mut self,
        spec: IndexedSpec,
        journal: Option<(&str, &str)>,
        applied: Applied,
    ) -> Changed {
        let version = self.version + 1;
        self.persist(version, &spec, journal);
        self.desired = Some(spec);
        self.version = version;
        Changed { version, applied }
    }

    /// A 409 unless the desired state is at version `expect` (or `None`).
    pub fn check_version(&self, expect: Option<u64>) -> Result<(), ApiError> {
        match expect {
            Some(v) if v != self.version => Err(ApiError::conflict(format!(
                "the desired state is at version {}, not {v}: another change came first; \
                 read it again and retry",
                self.version
            ))),
            _ => Ok(()),
        }
    }

    fn is_empty(&self) -> bool {
        self.rt.plan().counts() == (0, 0, 0)
    }

    /// Applies a spec. A platform with nothing running takes the spec's
    /// fixed settings (buffers, workers, ...) by starting afresh; one that
    /// runs something refuses a spec whose fixed settings differ.
    pub(crate) fn apply_spec(&mut self, candidate: &Candidate) -> Result<Applied, ApiError> {
        let spec = candidate.spec();
        if self.is_empty() && self.rt.settings().accepts(spec).is_err() {
            let mut p = PlatformSettings::for_spec(spec);
            p.max_nfs = self.platform.max_nfs;
            p.max_ports = self.platform.max_ports;
            p.max_chains = self.platform.max_chains;
            p.template_program = self.platform.template_program.clone();
            p.start_host = true;
            p.start_timeout = self.platform.start_timeout;
            let fresh = Runtime::start(p, self.registry).map_err(ApiError::from)?;
            let old = std::mem::replace(&mut self.rt, fresh);
            let _ = old.stop();
        }
        match candidate {
            Candidate::Valid(v) => self.rt.apply_valid(v),
            Candidate::Unchecked(s) => self.rt.apply(s),
        }
        .map_err(ApiError::from)
    }

    /// Stops running anything (a desired state needs a chain, so
    /// emptiness is no spec): `DELETE /v1/spec`, or the last chain moved
    /// away. The data plane stays up for the next apply.
    pub fn clear(&mut self) -> Result<Changed, ApiError> {
        let mut applied = Applied::default();
        if let Some(running) = &self.desired {
            applied = self.rt.apply_nothing(running).map_err(ApiError::from)?;
            tracing::info!(
                "nothing runs now: {} port(s), {} NF(s), {} chain(s) stopped",
                applied.diff.ports.removed.len(),
                applied.diff.nfs.removed.len(),
                applied.diff.chains.removed.len()
            );
        }
        let version = self.version + 1;
        if let Err(e) = self.dir.save(version, &serde_json::Value::Null) {
            tracing::error!("cannot persist the desired state: {e}");
        }
        self.desired = None;
        self.version = version;
        self.journal_len = 0;
        self.rollouts.deadlines.clear();
        Ok(Changed { version, applied })
    }
}
