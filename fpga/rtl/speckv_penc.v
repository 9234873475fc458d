// SPDX-License-Identifier: Apache-2.0
// speckv KV codec: page encoder of the fixed-width packed presets
// (docs/codec.md §19, entropy 4: k3p v3p k4p v4p k5p v5p, mode ids 33..38),
// with the bypass rule of §7 (opaque dtype, a non-finite element, a group
// outside the FP16 range, a record not shorter than raw -> raw record).
// Same stream interface as speckv_enc (cfg_* sampled with the first beat).
//
// A page pipeline of five stages, each holding a different page, pages in
// order; every page has one of NB buffer banks (page bytes, record bytes,
// per-group min / max / zf / inv, its fields) from its first beat until its
// last record beat is loaded into the output register:
//   LOAD   page beats into the bank; per group min / max, the page min / max
//          and the non-finite flag from the beat itself (E elements per
//          cycle, groups of the layout asked for; the page min / max is
//          group 0 when C turns out not to divide n); at the last beat the
//          layout (§1) and the §7 size rule.
//   PARAM  PG groups per cycle: z16 (toward -inf), d = mx - zf, sv = d /
//          (2^b - 1), s16 (toward +inf), inv = 1 / sf; binary32, RNE.
//   QUANT  E elements per cycle: q = clamp(rne((x - zf) * inv)), packed at
//          bit i*b of the stream (LSB first).
//   CRC    BB record bytes per cycle (bytes 0..19, then the payload).
//   EMIT   the record, one beat per cycle.
// A stage takes its next page in the cycle it finishes one, so a 4 KiB FP16
// page (64 beats at DW = 512) leaves every 64 cycles when PARAM needs at most
// 64 cycles (G <= 64 * PG) and the record is at most 64 beats.
// Preconditions as speckv_enc: 1 <= page bytes <= MAX_BYTES, whole elements.
`default_nettype none
module speckv_penc #(
  parameter integer DW = 512,
  parameter integer MAX_BYTES = 4096
) (
  input  wire                       clk,
  input  wire                       rst,
  input  wire                       in_valid,
  output wire                       in_ready,
  input  wire [DW-1:0]              in_data,
  input  wire [$clog2(DW/8+1)-1:0]  in_nbytes,
  input  wire                       in_last,
  input  wire [7:0]                 cfg_mode,
  input  wire [7:0]                 cfg_dtype,
  input  wire [15:0]                cfg_channels,
  output reg                        out_valid,
  input  wire                       out_ready,
  output reg  [DW-1:0]              out_data,
  output reg  [$clog2(DW/8+1)-1:0]  out_nbytes,
  output reg                        out_last
);
  localparam integer BB = DW / 8;
  localparam integer NBW = $clog2(BB + 1);
  localparam integer EMAX = BB / 2;               // elements per cycle (16-bit dtypes; FP32: BB/4)
  localparam integer NMAX = MAX_BYTES / 2;        // most elements (and groups) of a quantised page
  localparam integer RBMAX = 24 + MAX_BYTES;      // record buffer: a packed record is shorter than raw
  localparam integer NB = 8;                      // page banks (pages in flight)
  localparam integer PG = 2;                      // groups per PARAM cycle

  `include "speckv_codec_fn.vh"
  `include "speckv_packed_fn.vh"

  // per bank: buffers
  reg [7:0]  pg   [0:NB*MAX_BYTES-1];  // page bytes (raw record payload)
  reg [7:0]  rb   [0:NB*RBMAX-1];      // packed record (header, pairs, stream)
  reg [31:0] gmn  [0:NB*NMAX-1];
  reg [31:0] gmx  [0:NB*NMAX-1];
  reg [31:0] gzf  [0:NB*NMAX-1];
  reg [31:0] ginv [0:NB*NMAX-1];
  // per bank: the page's fields
  reg [7:0]  m_mode [0:NB-1];
  reg [7:0]  m_dtype [0:NB-1];
  reg [31:0] m_n [0:NB-1];
  reg [31:0] m_C [0:NB-1];
  reg [31:0] m_G [0:NB-1];
  reg [31:0] m_esz [0:NB-1];
  reg [31:0] m_plen [0:NB-1];
  reg [31:0] m_rlen [0:NB-1];
  reg [3:0]  m_bits [0:NB-1];
  reg [1:0]  m_grp [0:NB-1];
  reg        m_raw [0:NB-1];

  // stage state: pages completed per stage (mod 256), the bank in work
  reg [7:0]  doneA, doneB, doneC, doneD, doneE;
  reg        a_in;                  // LOAD: inside a page
  reg [31:0] a_nb;                  // LOAD: page bytes so far
  reg [7:0]  a_mode, a_dtype;
  reg [15:0] a_ch;
  reg [31:0] a_mn, a_mx;            // LOAD: page min / max
  reg        a_nf;                  // LOAD: a non-finite element so far
  reg        b_act, c_act, d_act, e_act;
  reg [2:0]  b_bank, c_bank, d_bank, e_bank;
  reg [31:0] b_idx, c_idx, d_pos, e_pos, d_crc;

  wire [2:0] a_bank = doneA[2:0];
  wire [7:0] inflight = doneA - doneE;
  assign in_ready = a_in || (inflight < NB);

  // preset -> b and group (ids 33..38: k3p v3p k4p v4p k5p v5p)
  function automatic [3:0] preset_bits(input [7:0] m);
    preset_bits = (m == 8'd33 || m == 8'd34) ? 4'd3 : (m == 8'd35 || m == 8'd36) ? 4'd4 : 4'd5;
  endfunction

  function automatic [31:0] group_of(input [31:0] i, input [1:0] g, input [31:0] c);
    group_of = (g == 2'd0) ? 32'd0 : (g == 2'd1) ? i % c : i / c;
  endfunction

  // binary32 "a < b" (finite; -0 == +0)
  function automatic lt32(input [31:0] a, input [31:0] b);
    reg [31:0] ka, kb;
    begin
      ka = (a[30:0] == 31'd0) ? 32'h80000000 : a[31] ? ~a : (a | 32'h80000000);
      kb = (b[30:0] == 31'd0) ? 32'h80000000 : b[31] ? ~b : (b | 32'h80000000);
      lt32 = ka < kb;
    end
  endfunction

  function automatic [31:0] elem32(input [2:0] bk, input [31:0] i);   // canonical binary32 of element i
    reg [31:0] r, o;
    begin
      o = bk * MAX_BYTES;
      if (m_dtype[bk] == 8'd3) r = {pg[o+4*i+3], pg[o+4*i+2], pg[o+4*i+1], pg[o+4*i]};
      else r = {16'd0, pg[o+2*i+1], pg[o+2*i]};
      elem32 = canon_elem(m_dtype[bk], r);
    end
  endfunction

  function automatic [7:0] recb(input [2:0] bk, input [31:0] k);
    recb = (m_raw[bk] && k >= 32'd24) ? pg[bk * MAX_BYTES + k - 32'd24] : rb[bk * RBMAX + k];
  endfunction

  integer j, k, p;
  reg [31:0] i, g, x, bp, nn, cc, cc0, t, zf, sf, sv, d, inv, nb0, es, ob, gb, rbo, amn, amx;
  reg [15:0] z16, s16;
  reg [7:0]  q, qmax, byt, dt, md, nextB, nextC, nextD, nextE;
  reg [15:0] ch;
  reg [31:0] tg, tpl;
  reg        kg, first, anf, bfin, cfin, dfin, efin, stop;
  reg [2:0]  bk;

  always @(posedge clk) begin
    if (rst) begin
      doneA <= 8'd0; doneB <= 8'd0; doneC <= 8'd0; doneD <= 8'd0; doneE <= 8'd0;
      a_in <= 1'b0;
      a_nb <= 32'd0;
      b_act <= 1'b0; c_act <= 1'b0; d_act <= 1'b0; e_act <= 1'b0;
      out_valid <= 1'b0;
      out_last <= 1'b0;
      out_nbytes <= {NBW{1'b0}};
      out_data <= {DW{1'b0}};
    end else begin
      // ------------------------------------------------------------ LOAD
      if (in_valid && in_ready) begin
        first = !a_in;
        dt = first ? cfg_dtype : a_dtype;
        md = first ? cfg_mode : a_mode;
        ch = first ? cfg_channels : a_ch;
        nb0 = first ? 32'd0 : a_nb;
        amn = a_mn;
        amx = a_mx;
        anf = first ? 1'b0 : a_nf;
        if (first) begin
          a_mode <= cfg_mode;
          a_dtype <= cfg_dtype;
          a_ch <= cfg_channels;
        end
        es = (dt == 8'd3) ? 32'd4 : (dt == 8'd0) ? 32'd1 : 32'd2;
        kg = (md == 8'd33 || md == 8'd35 || md == 8'd37);
        cc0 = (ch == 16'd0) ? 32'd1 : {16'd0, ch};         // the layout asked for
        ob = a_bank * MAX_BYTES;
        gb = a_bank * NMAX;
        for (j = 0; j < BB; j = j + 1)
          if (j < in_nbytes && nb0 + j < MAX_BYTES) pg[ob + nb0 + j] = in_data[8*j +: 8];
        if (dt != 8'd0)
          for (j = 0; j < EMAX; j = j + 1)
            if ((es == 32'd2 || j < EMAX / 2) && (j + 1) * es <= in_nbytes) begin
              x = canon_elem(dt, (es == 32'd4) ? in_data[32*(j % (EMAX / 2)) +: 32] : {16'd0, in_data[16*j +: 16]});
              i = nb0 / es + j;
              if (x[30:23] == 8'hFF) anf = 1'b1;
              if (i == 32'd0) begin
                amn = x;
                amx = x;
              end else begin
                if (lt32(x, amn)) amn = x;
                if (lt32(amx, x)) amx = x;
              end
              g = kg ? i % cc0 : i / cc0;
              if (g < NMAX) begin
                if (kg ? (i < cc0) : (i % cc0 == 32'd0)) begin
                  gmn[gb + g] = x;
                  gmx[gb + g] = x;
                end else begin
                  if (lt32(x, gmn[gb + g])) gmn[gb + g] = x;
                  if (lt32(gmx[gb + g], x)) gmx[gb + g] = x;
                end
              end
            end
        a_mn <= amn;
        a_mx <= amx;
        a_nf <= anf;
        a_nb <= nb0 + in_nbytes;
        a_in <= !in_last;
        if (in_last) begin
          // the page is complete: the layout (§1) and the §7 size rule
          nn = (nb0 + in_nbytes) / es;
          cc = {16'd0, ch};
          if (cc == 32'd0 || nn % cc != 32'd0) cc = 32'd1;
          tg = kg ? cc : nn / cc;
          tpl = 32'd4 * tg + (nn * {28'd0, preset_bits(md)} + 32'd7) / 32'd8;
          if (kg && cc != cc0) begin
            gmn[gb] = amn;                // C does not divide n: one channel group, the page
            gmx[gb] = amx;
          end
          // (token groups with C = 1 are one element each: 4n parameter bytes, always raw)
          m_mode[a_bank] = md;
          m_dtype[a_bank] = dt;
          m_bits[a_bank] = preset_bits(md);
          m_grp[a_bank] = kg ? 2'd1 : 2'd2;
          m_n[a_bank] = nn;
          m_C[a_bank] = cc;
          m_esz[a_bank] = es;
          m_G[a_bank] = tg;
          m_plen[a_bank] = tpl;
          if (dt == 8'd0 || tpl >= nn * es || anf) begin
            m_raw[a_bank] = 1'b1;
            m_rlen[a_bank] = 32'd24 + nb0 + in_nbytes;
          end else begin
            m_raw[a_bank] = 1'b0;
            m_rlen[a_bank] = 32'd24 + tpl;
          end
          doneA <= doneA + 8'd1;
        end
      end

      // ------------------------------------------------------------ PARAM (§19.2)
      bfin = 1'b0;
      if (b_act) begin
        bk = b_bank;
        if (m_raw[bk]) begin
          bfin = 1'b1;
        end else begin
          stop = 1'b0;
          qmax = (8'd1 << m_bits[bk]) - 8'd1;
          for (p = 0; p < PG; p = p + 1) begin
            g = b_idx + p;
            if (!stop && g < m_G[bk]) begin
              if (lt32(gmn[bk * NMAX + g], 32'hC77FE000) || lt32(32'h477FE000, gmx[bk * NMAX + g])) begin
                m_raw[bk] = 1'b1;                          // outside [-65504, 65504]: raw
                m_rlen[bk] = 32'd24 + m_n[bk] * m_esz[bk];
                stop = 1'b1;
              end else begin
                z16 = pk_f16_dir(gmn[bk * NMAX + g], 1'b0);
                if (z16 == 16'h8000) z16 = 16'h0000;
                zf = fp16_to_u32(z16);
                d = pk_sub32(gmx[bk * NMAX + g], zf);
                sv = pk_div32(d, u8_to_f32(qmax));
                s16 = (!sv[31] && sv[30:0] != 31'd0) ? pk_f16_dir(sv, 1'b1) : 16'h0000;
                sf = fp16_to_u32(s16);
                inv = (s16 != 16'h0000) ? pk_div32(32'h3F800000, sf) : 32'd0;
                gzf[bk * NMAX + g] = zf;
                ginv[bk * NMAX + g] = inv;
                rbo = bk * RBMAX + 24 + 4 * g;
                rb[rbo] = s16[7:0];
                rb[rbo + 1] = s16[15:8];
                rb[rbo + 2] = z16[7:0];
                rb[rbo + 3] = z16[15:8];
              end
            end
          end
          if (stop || b_idx + PG >= m_G[bk]) bfin = 1'b1;
        end
        b_idx <= b_idx + PG;
      end
      nextB = doneB + {7'd0, bfin};
      if (bfin) begin
        b_act <= 1'b0;
        doneB <= nextB;
      end
      if ((!b_act || bfin) && doneA != nextB) begin
        b_act <= 1'b1;
        b_bank <= nextB[2:0];
        b_idx <= 32'd0;
      end

      // ------------------------------------------------------------ QUANT (§19.3, §19.4)
      cfin = 1'b0;
      if (c_act) begin
        bk = c_bank;
        if (m_raw[bk]) begin
          cfin = 1'b1;
        end else begin
          qmax = (8'd1 << m_bits[bk]) - 8'd1;
          rbo = bk * RBMAX + 24 + 4 * m_G[bk];
          for (j = 0; j < EMAX; j = j + 1) begin
            i = c_idx + j;
            if (i < m_n[bk] && (m_esz[bk] == 32'd2 || j < EMAX / 2)) begin
              x = elem32(bk, i);
              g = bk * NMAX + group_of(i, m_grp[bk], m_C[bk]);
              t = pk_mul32(pk_sub32(x, gzf[g]), ginv[g]);
              q = pk_qround(t, qmax);
              for (k = 0; k < 8; k = k + 1)
                if (k < m_bits[bk]) begin
                  bp = i * m_bits[bk] + k;                  // stream bit
                  byt = (bp[2:0] == 3'd0) ? 8'd0 : rb[rbo + (bp >> 3)];
                  byt[bp[2:0]] = q[k];
                  rb[rbo + (bp >> 3)] = byt;
                end
            end
          end
          i = c_idx + ((m_esz[bk] == 32'd2) ? EMAX : EMAX / 2);
          c_idx <= i;
          if (i >= m_n[bk]) cfin = 1'b1;
        end
      end
      nextC = doneC + {7'd0, cfin};
      if (cfin) begin
        c_act <= 1'b0;
        doneC <= nextC;
      end
      if ((!c_act || cfin) && doneB != nextC) begin
        c_act <= 1'b1;
        c_bank <= nextC[2:0];
        c_idx <= 32'd0;
      end

      // ------------------------------------------------------------ CRC (header, then bytes 0..19, 24..)
      dfin = 1'b0;
      if (d_act) begin
        bk = d_bank;
        rbo = bk * RBMAX;
        if (d_pos == 32'd0) begin
          // header (§8); the CRC field is written when the CRC is known
          rb[rbo] = 8'h53; rb[rbo + 1] = 8'h4B; rb[rbo + 2] = 8'd1;
          rb[rbo + 3] = m_raw[bk] ? 8'd0 : m_mode[bk];
          rb[rbo + 4] = m_dtype[bk];
          rb[rbo + 5] = m_raw[bk] ? 8'd0 : {4'd0, m_bits[bk]};
          rb[rbo + 6] = m_raw[bk] ? 8'd0 : {6'd0, m_grp[bk]};
          rb[rbo + 7] = m_raw[bk] ? 8'd0 : 8'h10;
          nn = m_raw[bk] ? (m_rlen[bk] - 32'd24) / m_esz[bk] : m_n[bk];
          cc = m_raw[bk] ? 32'd1 : m_C[bk];
          rb[rbo + 8] = nn[7:0]; rb[rbo + 9] = nn[15:8]; rb[rbo + 10] = nn[23:16]; rb[rbo + 11] = nn[31:24];
          rb[rbo + 12] = cc[7:0]; rb[rbo + 13] = cc[15:8]; rb[rbo + 14] = 8'd0; rb[rbo + 15] = 8'd0;
          t = m_rlen[bk] - 32'd24;
          rb[rbo + 16] = t[7:0]; rb[rbo + 17] = t[15:8]; rb[rbo + 18] = t[23:16]; rb[rbo + 19] = t[31:24];
        end
        t = (d_pos == 32'd0) ? 32'hFFFFFFFF : d_crc;
        for (j = 0; j < BB; j = j + 1) begin
          k = d_pos + j;
          if (k < m_rlen[bk] && (k < 20 || k >= 24)) begin
            t = t ^ {24'd0, recb(bk, k)};
            for (p = 0; p < 8; p = p + 1)
              t = t[0] ? ((t >> 1) ^ 32'h82F63B78) : (t >> 1);
          end
        end
        d_crc <= t;
        d_pos <= d_pos + BB;
        if (d_pos + BB >= m_rlen[bk]) begin
          t = ~t;
          rb[rbo + 20] = t[7:0]; rb[rbo + 21] = t[15:8]; rb[rbo + 22] = t[23:16]; rb[rbo + 23] = t[31:24];
          dfin = 1'b1;
        end
      end
      nextD = doneD + {7'd0, dfin};
      if (dfin) begin
        d_act <= 1'b0;
        doneD <= nextD;
      end
      if ((!d_act || dfin) && doneC != nextD) begin
        d_act <= 1'b1;
        d_bank <= nextD[2:0];
        d_pos <= 32'd0;
      end

      // ------------------------------------------------------------ EMIT
      efin = 1'b0;
      if (!out_valid || out_ready) begin
        if (e_act) begin
          bk = e_bank;
          for (j = 0; j < BB; j = j + 1)
            out_data[8*j +: 8] <= (e_pos + j < m_rlen[bk]) ? recb(bk, e_pos + j) : 8'd0;
          out_nbytes <= (m_rlen[bk] - e_pos >= BB) ? BB[NBW-1:0] : (m_rlen[bk] - e_pos);
          out_last <= (e_pos + BB >= m_rlen[bk]);
          out_valid <= 1'b1;
          e_pos <= e_pos + BB;
          if (e_pos + BB >= m_rlen[bk]) efin = 1'b1;   // the bank is free once its last beat is out of it
        end else begin
          out_valid <= 1'b0;
          out_last <= 1'b0;
        end
      end
      nextE = doneE + {7'd0, efin};
      if (efin) begin
        e_act <= 1'b0;
        doneE <= nextE;
      end
      if ((!e_act || efin) && doneD != nextE) begin
        e_act <= 1'b1;
        e_bank <= nextE[2:0];
        e_pos <= 32'd0;
      end
    end
  end

  // exact binary32 of a small integer 1..255
  function automatic [31:0] u8_to_f32(input [7:0] v);
    integer p2, b2;
    reg [22:0] f;
    begin
      p2 = 0;
      for (b2 = 0; b2 < 8; b2 = b2 + 1)
        if (v[b2]) p2 = b2;
      f = {15'd0, v} << (23 - p2);
      u8_to_f32 = {1'b0, 8'd127 + p2[7:0], f};
    end
  endfunction
endmodule
`default_nettype wire
