// SPDX-License-Identifier: Apache-2.0
// speckv KV codec: page encoder of the fixed-width packed presets
// (docs/codec.md §19, entropy 4: k3p v3p k4p v4p k5p v5p, mode ids 33..38),
// with the bypass rule of §7 (opaque dtype, a non-finite element, a group
// outside the FP16 range, a record not shorter than raw -> raw record).
// Same stream interface as speckv_enc (cfg_* sampled with the first beat).
//
// One page at a time, in five phases (no overlap between pages):
//   LOAD   page beats into the page buffer; per group min / max and the
//          non-finite flag as the beats arrive (E elements per cycle).
//   PARAM  one group per cycle: z16 (toward -inf), d = mx - zf, sv = d /
//          (2^b - 1), s16 (toward +inf), inv = 1 / sf; binary32, RNE.
//   QUANT  E elements per cycle: q = clamp(rne((x - zf) * inv)), packed at
//          bit i*b of the stream (LSB first).
//   CRC    BB record bytes per cycle (bytes 0..19, then the payload).
//   EMIT   the record, one beat per cycle.
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
  localparam [2:0] S_LOAD = 3'd0, S_SCAN = 3'd1, S_PARAM = 3'd2, S_QUANT = 3'd3, S_CRC = 3'd4, S_EMIT = 3'd5;

  `include "speckv_codec_fn.vh"
  `include "speckv_packed_fn.vh"

  reg [2:0]  state;
  reg [7:0]  pg [0:MAX_BYTES-1];    // page bytes (raw record payload)
  reg [7:0]  rb [0:RBMAX-1];        // packed record (header, pairs, stream)
  reg [31:0] gmn [0:NMAX-1];
  reg [31:0] gmx [0:NMAX-1];
  reg [31:0] gzf [0:NMAX-1];
  reg [31:0] ginv [0:NMAX-1];

  reg [7:0]  m_mode, m_dtype;
  reg [15:0] m_ch;
  reg [31:0] nbytes_in;            // page bytes so far
  reg        raw;                   // bypass: the record is raw
  reg [31:0] n, C, G, esz, plen, rlen, idx, pos;
  reg [3:0]  bits;
  reg [1:0]  grp;
  reg [31:0] crc;
  reg        nonfin;

  assign in_ready = (state == S_LOAD);

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

  function automatic [31:0] elem32(input [31:0] i);   // canonical binary32 of element i
    reg [31:0] r;
    begin
      if (m_dtype == 8'd3) r = {pg[4*i+3], pg[4*i+2], pg[4*i+1], pg[4*i]};
      else r = {16'd0, pg[2*i+1], pg[2*i]};
      elem32 = canon_elem(m_dtype, r);
    end
  endfunction

  function automatic [7:0] recb(input [31:0] k);
    recb = (raw && k >= 32'd24) ? pg[k - 32'd24] : rb[k];
  endfunction

  integer j, k;
  reg [31:0] i, g, x, bp, nn, cc, t, zf, sf, sv, d, inv;
  reg [15:0] z16, s16;
  reg [7:0]  q, qmax, byt, dt, md;
  reg [31:0] tes, tg, tpl;
  reg        kg;

  always @(posedge clk) begin
    if (rst) begin
      state <= S_LOAD;
      nbytes_in <= 32'd0;
      out_valid <= 1'b0;
      out_last <= 1'b0;
      out_nbytes <= {NBW{1'b0}};
      out_data <= {DW{1'b0}};
    end else begin
      case (state)
        S_LOAD: if (in_valid) begin
          if (nbytes_in == 32'd0) begin
            m_mode <= cfg_mode;
            m_dtype <= cfg_dtype;
            m_ch <= cfg_channels;
          end
          for (j = 0; j < BB; j = j + 1)
            if (j < in_nbytes && nbytes_in + j < MAX_BYTES) pg[nbytes_in + j] = in_data[8*j +: 8];
          nbytes_in <= nbytes_in + in_nbytes;
          if (in_last) begin
            // the page is complete: the layout (§1) and the §7 size rule
            dt = (nbytes_in == 32'd0) ? cfg_dtype : m_dtype;
            md = (nbytes_in == 32'd0) ? cfg_mode : m_mode;
            tes = (dt == 8'd3) ? 32'd4 : (dt == 8'd0) ? 32'd1 : 32'd2;
            nn = (nbytes_in + in_nbytes) / tes;
            cc = {16'd0, (nbytes_in == 32'd0) ? cfg_channels : m_ch};
            if (cc == 32'd0 || nn % cc != 32'd0) cc = 32'd1;
            kg = (md == 8'd33 || md == 8'd35 || md == 8'd37);
            tg = kg ? cc : nn / cc;
            tpl = 32'd4 * tg + (nn * {28'd0, preset_bits(md)} + 32'd7) / 32'd8;
            bits <= preset_bits(md);
            grp <= kg ? 2'd1 : 2'd2;
            n <= nn;
            C <= cc;
            esz <= tes;
            G <= tg;
            plen <= tpl;
            idx <= 32'd0;
            nonfin = 1'b0;
            pos <= 32'd0;
            crc <= 32'hFFFFFFFF;
            rlen <= 32'd24 + nbytes_in + in_nbytes;
            if (dt == 8'd0 || tpl >= nn * tes) begin
              raw <= 1'b1;
              state <= S_CRC;
            end else begin
              raw <= 1'b0;
              state <= S_SCAN;
            end
          end
        end
        S_SCAN: begin
          // per group min / max, non-finite flag: E elements per cycle
          for (j = 0; j < EMAX; j = j + 1) begin
            i = idx + j;
            if (i < n && (esz == 32'd2 || j < EMAX / 2)) begin
              x = elem32(i);
              if (x[30:23] == 8'hFF) nonfin = 1'b1;
              g = group_of(i, grp, C);
              if ((grp == 2'd1) ? (i < C) : (i % C == 32'd0)) begin
                gmn[g] = x;
                gmx[g] = x;
              end else begin
                if (lt32(x, gmn[g])) gmn[g] = x;
                if (lt32(gmx[g], x)) gmx[g] = x;
              end
            end
          end
          i = idx + ((esz == 32'd2) ? EMAX : EMAX / 2);
          idx <= i;
          if (i >= n) begin
            idx <= 32'd0;
            state <= S_PARAM;
            if (nonfin) begin
              raw <= 1'b1;
              state <= S_CRC;
              rlen <= 32'd24 + n * esz;
              pos <= 32'd0;
              crc <= 32'hFFFFFFFF;
            end
          end
        end
        S_PARAM: begin
          // one group per cycle (§19.2)
          g = idx;
          if (lt32(gmn[g], 32'hC77FE000) || lt32(32'h477FE000, gmx[g])) begin
            raw <= 1'b1;                          // outside [-65504, 65504]: raw
            state <= S_CRC;
            rlen <= 32'd24 + n * esz;
            pos <= 32'd0;
            crc <= 32'hFFFFFFFF;
          end else begin
            z16 = pk_f16_dir(gmn[g], 1'b0);
            if (z16 == 16'h8000) z16 = 16'h0000;
            zf = fp16_to_u32(z16);
            d = pk_sub32(gmx[g], zf);
            qmax = (8'd1 << bits) - 8'd1;
            sv = pk_div32(d, u8_to_f32(qmax));
            s16 = (!sv[31] && sv[30:0] != 31'd0) ? pk_f16_dir(sv, 1'b1) : 16'h0000;
            sf = fp16_to_u32(s16);
            inv = (s16 != 16'h0000) ? pk_div32(32'h3F800000, sf) : 32'd0;
            gzf[g] = zf;
            ginv[g] = inv;
            rb[24 + 4*g] = s16[7:0];
            rb[24 + 4*g + 1] = s16[15:8];
            rb[24 + 4*g + 2] = z16[7:0];
            rb[24 + 4*g + 3] = z16[15:8];
            idx <= idx + 32'd1;
            if (idx + 32'd1 >= G) begin
              idx <= 32'd0;
              state <= S_QUANT;
            end
          end
        end
        S_QUANT: begin
          // §19.3 and §19.4: E elements per cycle
          qmax = (8'd1 << bits) - 8'd1;
          for (j = 0; j < EMAX; j = j + 1) begin
            i = idx + j;
            if (i < n && (esz == 32'd2 || j < EMAX / 2)) begin
              x = elem32(i);
              g = group_of(i, grp, C);
              t = pk_mul32(pk_sub32(x, gzf[g]), ginv[g]);
              q = pk_qround(t, qmax);
              for (k = 0; k < 8; k = k + 1)
                if (k < bits) begin
                  bp = i * bits + k;                        // stream bit
                  byt = (bp[2:0] == 3'd0) ? 8'd0 : rb[24 + 4*G + (bp >> 3)];
                  byt[bp[2:0]] = q[k];
                  rb[24 + 4*G + (bp >> 3)] = byt;
                end
            end
          end
          i = idx + ((esz == 32'd2) ? EMAX : EMAX / 2);
          idx <= i;
          if (i >= n) begin
            state <= S_CRC;
            rlen <= 32'd24 + plen;
            pos <= 32'd0;
            crc <= 32'hFFFFFFFF;
          end
        end
        S_CRC: begin
          if (pos == 32'd0) begin
            // header (§8); the CRC field is written when the CRC is known
            rb[0] = 8'h53; rb[1] = 8'h4B; rb[2] = 8'd1;
            rb[3] = raw ? 8'd0 : m_mode;
            rb[4] = m_dtype;
            rb[5] = raw ? 8'd0 : {4'd0, bits};
            rb[6] = raw ? 8'd0 : {6'd0, grp};
            rb[7] = raw ? 8'd0 : 8'h10;
            nn = raw ? (rlen - 32'd24) / esz : n;
            cc = raw ? 32'd1 : C;
            rb[8] = nn[7:0]; rb[9] = nn[15:8]; rb[10] = nn[23:16]; rb[11] = nn[31:24];
            rb[12] = cc[7:0]; rb[13] = cc[15:8]; rb[14] = 8'd0; rb[15] = 8'd0;
            t = rlen - 32'd24;
            rb[16] = t[7:0]; rb[17] = t[15:8]; rb[18] = t[23:16]; rb[19] = t[31:24];
          end
          t = crc;
          for (j = 0; j < BB; j = j + 1) begin
            k = pos + j;
            if (k < rlen && (k < 20 || k >= 24)) begin
              t = t ^ {24'd0, recb(k)};
              for (i = 0; i < 8; i = i + 1)
                t = t[0] ? ((t >> 1) ^ 32'h82F63B78) : (t >> 1);
            end
          end
          crc <= t;
          pos <= pos + BB;
          if (pos + BB >= rlen) begin
            t = ~t;
            rb[20] = t[7:0]; rb[21] = t[15:8]; rb[22] = t[23:16]; rb[23] = t[31:24];
            pos <= 32'd0;
            state <= S_EMIT;
          end
        end
        S_EMIT: begin
          if (!out_valid || out_ready) begin
            if (out_valid && out_last) begin
              out_valid <= 1'b0;
              out_last <= 1'b0;
              state <= S_LOAD;
              nbytes_in <= 32'd0;
            end else begin
              for (j = 0; j < BB; j = j + 1)
                out_data[8*j +: 8] <= (pos + j < rlen) ? recb(pos + j) : 8'd0;
              out_nbytes <= (rlen - pos >= BB) ? BB[NBW-1:0] : (rlen - pos);
              out_last <= (pos + BB >= rlen);
              out_valid <= 1'b1;
              pos <= pos + BB;
            end
          end
        end
        default: state <= S_LOAD;
      endcase
    end
  end

  // exact binary32 of a small integer 1..255
  function automatic [31:0] u8_to_f32(input [7:0] v);
    integer p, b2;
    reg [22:0] f;
    begin
      p = 0;
      for (b2 = 0; b2 < 8; b2 = b2 + 1)
        if (v[b2]) p = b2;
      f = {15'd0, v} << (23 - p);
      u8_to_f32 = {1'b0, 8'd127 + p[7:0], f};
    end
  endfunction
endmodule
`default_nettype wire
