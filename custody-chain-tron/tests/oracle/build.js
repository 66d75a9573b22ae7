// Encoding oracle for custody-chain-tron: builds and signs TRX and TRC20 transfers OFFLINE with
// TronWeb (the TRON Foundation's JavaScript SDK) from a fixed reference block, so the Rust test
// (tests/oracle.rs) can compare raw_data_hex, txID and signature byte for byte.
//
// Input (stdin, JSON):
//   { "keys": ["<hex private key>", ...],
//     "cases": [ { "kind": "trx", "key": <index in keys>, "to": "T...", "amount": "<sun>",
//                  "block": { "ref_block_bytes", "ref_block_hash", "expiration", "timestamp" } },
//                { "kind": "trc20", "key": i, "token": "T...", "to": "T...", "amount": "<units>",
//                  "fee_limit": <sun>, "block": {...} } ] }
// Output (stdout, JSON):
//   { "addresses": ["T...", ...],            // TronWeb.address.fromPrivateKey of each key
//     "txs": [ { "txID", "raw_data_hex", "signature", "owner" } ] }
//
// No network: every builder gets `blockHeader` (so TronWeb does not ask a node for the
// reference block) and TRC20 calls use `txLocal: true`. The fullHost below is never contacted.
'use strict';

const { TronWeb } = require('tronweb');

async function main() {
  const input = JSON.parse(require('fs').readFileSync(0, 'utf8'));
  const tronWeb = new TronWeb({ fullHost: 'http://127.0.0.1:9' });

  const addresses = input.keys.map((k) => TronWeb.address.fromPrivateKey(k));
  const txs = [];
  for (const c of input.cases) {
    const key = input.keys[c.key];
    const from = addresses[c.key];
    const options = { blockHeader: c.block };
    let tx;
    if (c.kind === 'trx') {
      // sendTrx takes a JS number of sun: the Rust side keeps amounts within 2^53.
      tx = await tronWeb.transactionBuilder.sendTrx(c.to, Number(c.amount), from, options);
    } else if (c.kind === 'trc20') {
      const built = await tronWeb.transactionBuilder.triggerSmartContract(
        c.token,
        'transfer(address,uint256)',
        { ...options, feeLimit: c.fee_limit, callValue: 0, txLocal: true },
        [
          { type: 'address', value: c.to },
          { type: 'uint256', value: c.amount },
        ],
        from,
      );
      tx = built.transaction;
    } else {
      throw new Error('unknown case kind ' + c.kind);
    }
    const signed = await tronWeb.trx.sign(tx, key);
    txs.push({
      txID: signed.txID,
      raw_data_hex: signed.raw_data_hex,
      signature: signed.signature[0],
      owner: from,
    });
  }
  process.stdout.write(JSON.stringify({ addresses, txs }));
}

main().catch((e) => {
  process.stderr.write(String(e && e.stack ? e.stack : e) + '\n');
  process.exit(1);
});
