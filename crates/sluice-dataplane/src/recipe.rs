//! How to build one NF instance, anywhere: on the control thread (inline
//! NFs), or in an NF process after its template forked it.
//!
//! A recipe is what the compiler learnt while it built the NF once to
//! validate it: its type and config, and every name the NF looked up with
//! the answer it got (`firewall` asks for its reject port, `classifier`
//! for the NFs it sends to, ...). A later build asks the same questions
//! (builds are deterministic) and gets the same answers from the record,
//! so an NF process needs no copy of the spec or of the name tables, and
//! the compiler can tell which NFs must be rebuilt when names change: only
//! those whose recorded answers differ.

use std::cell::{Cell, RefCell};

use serde::{Deserialize, Serialize};
use sluice_nf::{BuildContext, IngressPort, NetworkFunction, NfId, NfType, PortId, Resolver};
use sluice_spec::{ConfigNode, SpecError};

/// What an NF's build looked at besides its recipe's type, config and
/// answers ([`NfRecipe::build_telling`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Looked {
    /// How many instances ran before (`Resolver::restarts`).
    pub restarts: bool,
    /// Its name (`BuildContext::name`).
    pub name: bool,
}

/// A name an NF looked up while it was built, and the answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Answer {
    /// `Resolver::nf(name)`.
    Nf(String, Option<u16>),
    /// `Resolver::port(name)` (output-capable ports).
    Port(String, Option<u16>),
    /// `Resolver::input_port(name)` (ports that receive).
    InputPort(String, Option<u16>),
    /// `Resolver::chain_ingress()`: the ports its chains start at.
    ChainIngress(Vec<Ingress>),
}

/// An [`IngressPort`] as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ingress {
    /// Port id.
    pub id: u16,
    /// Port name.
    pub name: String,
    /// Port kind name.
    pub kind: String,
    /// Whether packets can leave through it.
    pub can_transmit: bool,
}

impl Ingress {
    fn of(p: &IngressPort) -> Ingress {
        Ingress {
            id: p.id.0,
            name: p.name.clone(),
            kind: p.kind.to_string(),
            can_transmit: p.can_transmit,
        }
    }

    fn port(&self) -> IngressPort {
        IngressPort {
            id: PortId(self.id),
            name: self.name.clone(),
            // Kind names are a fixed set; the recorded one maps back to it.
            kind: sluice_spec::PortKind::NAMES
                .iter()
                .copied()
                .find(|k| *k == self.kind)
                .unwrap_or("unknown"),
            can_transmit: self.can_transmit,
        }
    }
}

/// What names resolve to when an NF is built: the compiler's view of the
/// ports and NFs of the spec being compiled.
pub trait Names {
    /// The NF called `name`.
    fn nf(&self, name: &str) -> Option<u16>;
    /// The output-capable port called `name`.
    fn output_port(&self, name: &str) -> Option<u16>;
    /// The receiving port called `name`.
    fn input_port(&self, name: &str) -> Option<u16>;
    /// The ports the chains that pass NF `nf` start at.
    fn chain_ingress(&self, nf: &str) -> Vec<IngressPort>;
}

/// Everything needed to build an instance of one NF.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NfRecipe {
    /// Instance name.
    pub name: String,
    /// Type name (looked up in the registry of whoever builds).
    pub type_name: String,
    /// Its `config`.
    pub config: ConfigNode,
    /// The names it looked up when it was built, with their answers.
    pub answers: Vec<Answer>,
    /// Instances of it running side by side (one per worker).
    pub replicas: u32,
    /// Flow ids are below this.
    pub flow_capacity: u32,
}

/// Answers from a fixed record; a question the record lacks gets `None`
/// (an NF that asks something new was built from another config).
struct Recorded<'a> {
    answers: &'a [Answer],
    replicas: u32,
    restarts: u32,
    /// The build asked [`Resolver::restarts`].
    asked_restarts: Cell<bool>,
}

impl Resolver for Recorded<'_> {
    fn nf(&self, name: &str) -> Option<NfId> {
        self.answers.iter().find_map(|a| match a {
            Answer::Nf(n, id) if n == name => Some(id.map(NfId)),
            _ => None,
        })?
    }
    fn port(&self, name: &str) -> Option<PortId> {
        self.answers.iter().find_map(|a| match a {
            Answer::Port(n, id) if n == name => Some(id.map(PortId)),
            _ => None,
        })?
    }
    fn input_port(&self, name: &str) -> Option<PortId> {
        self.answers.iter().find_map(|a| match a {
            Answer::InputPort(n, id) if n == name => Some(id.map(PortId)),
            _ => None,
        })?
    }
    fn chain_ingress(&self) -> Vec<IngressPort> {
        self.answers
            .iter()
            .find_map(|a| match a {
                Answer::ChainIngress(v) => Some(v.iter().map(Ingress::port).collect()),
                _ => None,
            })
            .unwrap_or_default()
    }
    fn replicas(&self) -> u32 {
        self.replicas
    }
    fn restarts(&self) -> u32 {
        self.asked_restarts.set(true);
        self.restarts
    }
}

/// Answers from live name tables, writing down every question.
struct Recording<'a> {
    names: &'a dyn Names,
    nf: &'a str,
    replicas: u32,
    log: RefCell<Vec<Answer>>,
}

impl Recording<'_> {
    fn note(&self, a: Answer) {
        let mut log = self.log.borrow_mut();
        if !log.contains(&a) {
            log.push(a);
        }
    }
}

impl Resolver for Recording<'_> {
    fn nf(&self, name: &str) -> Option<NfId> {
        let id = self.names.nf(name);
        self.note(Answer::Nf(name.to_string(), id));
        id.map(NfId)
    }
    fn port(&self, name: &str) -> Option<PortId> {
        let id = self.names.output_port(name);
        self.note(Answer::Port(name.to_string(), id));
        id.map(PortId)
    }
    fn input_port(&self, name: &str) -> Option<PortId> {
        let id = self.names.input_port(name);
        self.note(Answer::InputPort(name.to_string(), id));
        id.map(PortId)
    }
    fn chain_ingress(&self) -> Vec<IngressPort> {
        let ports = self.names.chain_ingress(self.nf);
        self.note(Answer::ChainIngress(
            ports.iter().map(Ingress::of).collect(),
        ));
        ports
    }
    fn replicas(&self) -> u32 {
        self.replicas
    }
}

impl NfRecipe {
    /// Builds the NF for the first time against `names`, recording its
    /// questions into the returned recipe.
    #[allow(clippy::too_many_arguments)] // the recipe's fields, in order
    pub fn first_build(
        nf_type: &NfType,
        name: &str,
        config: &ConfigNode,
        names: &dyn Names,
        replicas: u32,
        flow_capacity: u32,
    ) -> Result<(NfRecipe, Box<dyn NetworkFunction>), SpecError> {
        let rec = Recording {
            names,
            nf: name,
            replicas,
            log: RefCell::new(Vec::new()),
        };
        let nf = (nf_type.build)(&BuildContext {
            name: sluice_nf::NfName::new(name),
            config,
            resolver: &rec,
            flow_capacity,
        })?;
        Ok((
            NfRecipe {
                name: name.to_string(),
                type_name: nf_type.name.to_string(),
                config: config.clone(),
                answers: rec.log.into_inner(),
                replicas,
                flow_capacity,
            },
            nf,
        ))
    }

    /// The names it looked up when it was built (an NF or port named so
    /// later would change its answer).
    pub fn asked_about(&self) -> impl Iterator<Item = &str> + '_ {
        self.answers.iter().filter_map(|a| match a {
            Answer::Nf(n, _) | Answer::Port(n, _) | Answer::InputPort(n, _) => Some(n.as_str()),
            Answer::ChainIngress(_) => None,
        })
    }

    /// Whether `names` still gives every recorded answer (if not, the NF
    /// must be rebuilt: something it refers to changed).
    pub fn answers_hold(&self, names: &dyn Names) -> bool {
        self.answers.iter().all(|a| match a {
            Answer::Nf(n, id) => names.nf(n) == *id,
            Answer::Port(n, id) => names.output_port(n) == *id,
            Answer::InputPort(n, id) => names.input_port(n) == *id,
            Answer::ChainIngress(v) => {
                let now: Vec<Ingress> = names
                    .chain_ingress(&self.name)
                    .iter()
                    .map(Ingress::of)
                    .collect();
                now == *v
            }
        })
    }

    /// Builds an instance; `restarts` instances of it ran before this one
    /// ([`Resolver::restarts`]).
    pub fn build(
        &self,
        registry: &[NfType],
        restarts: u32,
    ) -> Result<Box<dyn NetworkFunction>, SpecError> {
        self.build_telling(registry, restarts).0
    }

    /// [`Self::build`], and what the build looked at besides the recipe's
    /// type, config and answers: an instance whose build did not is the
    /// same for any restart count and any name (what lets one shell serve
    /// an NF's first start and its restarts, and NFs that differ only by
    /// name).
    pub fn build_telling(
        &self,
        registry: &[NfType],
        restarts: u32,
    ) -> (Result<Box<dyn NetworkFunction>, SpecError>, Looked) {
        let resolver = Recorded {
            answers: &self.answers,
            replicas: self.replicas,
            restarts,
            asked_restarts: Cell::new(false),
        };
        let nf_type = registry.iter().find(|t| t.name == self.type_name);
        let Some(nf_type) = nf_type else {
            let e = (self.config).error(format!("unknown NF type `{}`", self.type_name));
            return (Err(e), Looked::default());
        };
        let ctx = BuildContext {
            name: sluice_nf::NfName::new(&self.name),
            config: &self.config,
            resolver: &resolver,
            flow_capacity: self.flow_capacity,
        };
        let built = (nf_type.build)(&ctx);
        let looked = Looked {
            restarts: resolver.asked_restarts.get(),
            name: ctx.name.was_read(),
        };
        (built, looked)
    }

    /// The recipe as a key for what was built from it: its type, its
    /// config's value and source (relative paths in it resolve there),
    /// its answers, and its name unless `name_free` (the build did not
    /// read it). Not where in the spec the config was written: that only
    /// places error messages, and NFs added one by one through the API
    /// sit at different places of different texts.
    pub fn key(&self, name_free: bool) -> Vec<u8> {
        #[derive(Serialize)]
        struct Key<'a> {
            name: &'a str,
            type_name: &'a str,
            config: Vec<u8>,
            source: &'a str,
            answers: &'a [Answer],
            replicas: u32,
            flow_capacity: u32,
        }
        let key = Key {
            name: if name_free { "" } else { &self.name },
            type_name: &self.type_name,
            config: serde_json::to_vec(&self.config.to_json()).unwrap_or_default(),
            source: self.config.source().as_str(),
            answers: &self.answers,
            replicas: self.replicas,
            flow_capacity: self.flow_capacity,
        };
        postcard::to_allocvec(&key).unwrap_or_default()
    }
}
