//! What each TPC-C transaction is asked to do, drawn as tpcc-mysql's driver draws it: a
//! uniform home warehouse and district per transaction, NURand customers and items, 5-15 order
//! lines each supplied remotely 1% of the time, a 1% New-Order rollback through an unused item
//! id on the last line, 15% remote Payments, 60% customers chosen by last name, Delivery with a
//! random carrier and Stock-Level with a threshold of 10-20. The transaction type comes from a
//! shuffled deck: tpcc-mysql's 10:10:1:1:1, or the spec's minimum mix 45:43:4:4:4.
//!
//! Inputs are plain data so the input rules can be tested without an engine.

use rand::seq::SliceRandom;
use rand::Rng;

use super::random::{last_name, nurand, NuRandC};
use super::scale::{Scale, DISTRICTS};

/// The five transactions, in tpcc-mysql's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TxnKind {
    NewOrder,
    Payment,
    OrderStatus,
    Delivery,
    StockLevel,
}

impl TxnKind {
    pub const ALL: [TxnKind; 5] = [
        TxnKind::NewOrder,
        TxnKind::Payment,
        TxnKind::OrderStatus,
        TxnKind::Delivery,
        TxnKind::StockLevel,
    ];

    /// Index into per-type arrays.
    pub fn index(self) -> usize {
        self as usize
    }

    /// Upper-case name as go-tpc prints it.
    pub fn label(self) -> &'static str {
        match self {
            TxnKind::NewOrder => "NEW_ORDER",
            TxnKind::Payment => "PAYMENT",
            TxnKind::OrderStatus => "ORDER_STATUS",
            TxnKind::Delivery => "DELIVERY",
            TxnKind::StockLevel => "STOCK_LEVEL",
        }
    }
}

/// The transaction mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mix {
    /// tpcc-mysql's deck: 10:10:1:1:1.
    TpccMysql,
    /// The spec's minimum percentages: 45:43:4:4:4.
    Spec,
}

impl Mix {
    pub fn weights(self) -> [u32; 5] {
        match self {
            Mix::TpccMysql => [10, 10, 1, 1, 1],
            Mix::Spec => [45, 43, 4, 4, 4],
        }
    }

    pub fn parse(s: &str) -> Result<Mix, String> {
        match s {
            "tpcc-mysql" => Ok(Mix::TpccMysql),
            "spec" => Ok(Mix::Spec),
            _ => Err(format!("unknown mix {s:?}: expected tpcc-mysql or spec")),
        }
    }
}

/// A shuffled deck of transaction kinds, dealt without replacement and reshuffled when empty.
pub struct Deck {
    cards: Vec<TxnKind>,
    next: usize,
}

impl Deck {
    pub fn new(mix: Mix) -> Deck {
        let mut cards = Vec::new();
        for (kind, n) in TxnKind::ALL.iter().zip(mix.weights()) {
            cards.extend(std::iter::repeat_n(*kind, n as usize));
        }
        let next = cards.len();
        Deck { cards, next }
    }

    pub fn deal(&mut self, rng: &mut impl Rng) -> TxnKind {
        if self.next >= self.cards.len() {
            self.cards.shuffle(rng);
            self.next = 0;
        }
        let k = self.cards[self.next];
        self.next += 1;
        k
    }
}

/// How a customer is named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CustomerBy {
    Id(u32),
    LastName(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineInput {
    pub i_id: u32,
    pub supply_w: u32,
    pub quantity: u8,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewOrderInput {
    pub w: u32,
    pub d: u8,
    pub c: u32,
    pub lines: Vec<LineInput>,
}

impl NewOrderInput {
    /// True when the last line names an unused item, so the transaction must roll back.
    pub fn will_roll_back(&self, scale: &Scale) -> bool {
        self.lines.last().is_some_and(|l| l.i_id > scale.items)
    }
    pub fn all_local(&self) -> bool {
        self.lines.iter().all(|l| l.supply_w == self.w)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentInput {
    pub w: u32,
    pub d: u8,
    pub c_w: u32,
    pub c_d: u8,
    pub customer: CustomerBy,
    pub amount_cents: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderStatusInput {
    pub w: u32,
    pub d: u8,
    pub customer: CustomerBy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeliveryInput {
    pub w: u32,
    pub carrier: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StockLevelInput {
    pub w: u32,
    pub d: u8,
    pub threshold: u32,
}

/// Draws inputs for one client.
pub struct InputGen {
    pub scale: Scale,
    pub c: NuRandC,
}

impl InputGen {
    fn other_warehouse(&self, rng: &mut impl Rng, w: u32) -> u32 {
        if self.scale.warehouses <= 1 {
            return w;
        }
        let o = rng.gen_range(1..self.scale.warehouses);
        if o >= w {
            o + 1
        } else {
            o
        }
    }

    fn customer(&self, rng: &mut impl Rng) -> CustomerBy {
        if rng.gen_range(1..=100) <= 60 {
            let n = nurand(rng, 255, self.c.c_last_run, 0, self.scale.last_name_max());
            CustomerBy::LastName(last_name(n))
        } else {
            CustomerBy::Id(self.customer_id(rng))
        }
    }

    fn customer_id(&self, rng: &mut impl Rng) -> u32 {
        nurand(rng, 1023, self.c.c_id, 1, self.scale.customers)
    }

    fn home(&self, rng: &mut impl Rng) -> (u32, u8) {
        (
            rng.gen_range(1..=self.scale.warehouses),
            rng.gen_range(1..=DISTRICTS),
        )
    }

    pub fn new_order(&self, rng: &mut impl Rng) -> NewOrderInput {
        let (w, d) = self.home(rng);
        let c = self.customer_id(rng);
        let n = rng.gen_range(5..=15);
        let rollback = rng.gen_range(1..=100) == 1;
        let lines = (0..n)
            .map(|i| {
                let i_id = if rollback && i == n - 1 {
                    self.scale.items + 1
                } else {
                    nurand(rng, 8191, self.c.ol_i_id, 1, self.scale.items)
                };
                let supply_w = if rng.gen_range(1..=100) == 1 {
                    self.other_warehouse(rng, w)
                } else {
                    w
                };
                LineInput {
                    i_id,
                    supply_w,
                    quantity: rng.gen_range(1..=10),
                }
            })
            .collect();
        NewOrderInput { w, d, c, lines }
    }

    pub fn payment(&self, rng: &mut impl Rng) -> PaymentInput {
        let (w, d) = self.home(rng);
        let (c_w, c_d) = if self.scale.warehouses > 1 && rng.gen_range(1..=100) > 85 {
            (self.other_warehouse(rng, w), rng.gen_range(1..=DISTRICTS))
        } else {
            (w, d)
        };
        let customer = self.customer(rng);
        PaymentInput {
            w,
            d,
            c_w,
            c_d,
            customer,
            amount_cents: rng.gen_range(100..=500_000),
        }
    }

    pub fn order_status(&self, rng: &mut impl Rng) -> OrderStatusInput {
        let (w, d) = self.home(rng);
        OrderStatusInput {
            w,
            d,
            customer: self.customer(rng),
        }
    }

    pub fn delivery(&self, rng: &mut impl Rng) -> DeliveryInput {
        DeliveryInput {
            w: rng.gen_range(1..=self.scale.warehouses),
            carrier: rng.gen_range(1..=10),
        }
    }

    pub fn stock_level(&self, rng: &mut impl Rng) -> StockLevelInput {
        let (w, d) = self.home(rng);
        StockLevelInput {
            w,
            d,
            threshold: rng.gen_range(10..=20),
        }
    }
}
